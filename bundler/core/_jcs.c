/*
 * bundler._jcs: RFC 8785 (JCS) serialisation of plain JSON values, in C.
 *
 * dumps(value) -> bytes writes the canonical JSON of a value built only of the exact
 * types dict (str keys), list, str, int, float, bool and None. It never guesses: for
 * any other type or subclass, NaN or infinities, integers outside -(2^53-1)..2^53-1,
 * lone surrogates, non-str keys and nesting deeper than MAX_DEPTH it raises
 * Fallback and writes nothing, and bundler.canonical hands the value on to its
 * slower paths; the reference path owns every error message.
 *
 * Nothing here runs Python code (no __str__, no __index__, no comparisons of
 * Python objects), so the borrowed references taken from lists and dicts stay
 * valid for as long as they are used: the containers cannot change while the GIL
 * is held and no Python code runs. Only raising an exception allocates objects the
 * garbage collector tracks (and so might run finalizers), and every path returns at
 * once after raising, touching no borrowed reference again. The depth limit bounds
 * the C recursion, and also stops self-containing containers.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The same limit as bundler.canonical.MAX_DEPTH: `[]` has depth 1, 64 is allowed. */
#define JCS_MAX_DEPTH 64
#define JCS_MAX_SAFE_INTEGER 9007199254740991LL
/* Characters of a string handled per buffer reservation (at most 6 bytes each). */
#define JCS_STRING_CHUNK 8192
/* Dicts up to this size sort their members in a buffer on the C stack. */
#define JCS_STACK_MEMBERS 32
/* Objects of 2 to JCS_SHAPE_KEYS members remember their key order in one of
   JCS_SHAPES slots: documents repeat the same few key sets many times over. */
#define JCS_SHAPE_KEYS 16
#define JCS_SHAPES 64

/* Values are scattered over the heap: asking for the next few early lets their
   cache misses overlap. */
#if defined(__GNUC__) || defined(__clang__)
#define prefetch(address) __builtin_prefetch(address)
#else
#define prefetch(address) ((void)0)
#endif

typedef struct {
    PyObject *fallback;
} jcs_state;

/* The UTF-16 order of one set of keys, seen in one insertion order. Within one call
   the value is not changed and every key is alive, so a key's address identifies it. */
typedef struct {
    Py_ssize_t n; /* 0: empty slot */
    PyObject *keys[JCS_SHAPE_KEYS];
    unsigned char order[JCS_SHAPE_KEYS];
} Shape;

typedef struct {
    PyObject *bytes; /* the result, grown geometrically, shrunk to fit at the end */
    char *base;      /* PyBytes_AS_STRING(bytes) */
    Py_ssize_t len;
    Py_ssize_t cap;
    PyObject *fallback;
    Shape *shapes; /* JCS_SHAPES slots, allocated at the first object that uses them */
} Writer;

typedef struct {
    const void *data;
    Py_ssize_t len;
    int kind;
    PyObject *key;
    PyObject *value;
} Member;

static int encode(Writer *w, PyObject *value, int depth);

/* ------------------------------------------------------------------------------ */
/* Output buffer */

static int
grow(Writer *w, Py_ssize_t extra)
{
    if (extra > PY_SSIZE_T_MAX - w->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = w->len + extra;
    Py_ssize_t cap = w->cap <= PY_SSIZE_T_MAX / 2 ? w->cap * 2 : PY_SSIZE_T_MAX;
    if (cap < need) {
        cap = need;
    }
    /* On failure _PyBytes_Resize releases the object and sets the pointer to NULL. */
    if (_PyBytes_Resize(&w->bytes, cap) < 0) {
        return -1;
    }
    w->base = PyBytes_AS_STRING(w->bytes);
    w->cap = cap;
    return 0;
}

static inline int
reserve(Writer *w, Py_ssize_t extra)
{
    if (extra <= w->cap - w->len) {
        return 0;
    }
    return grow(w, extra);
}

static inline int
write_raw(Writer *w, const char *text, Py_ssize_t n)
{
    if (reserve(w, n) < 0) {
        return -1;
    }
    memcpy(w->base + w->len, text, (size_t)n);
    w->len += n;
    return 0;
}

static int
fall_back(Writer *w, const char *why)
{
    PyErr_SetString(w->fallback, why);
    return -1;
}

/* ------------------------------------------------------------------------------ */
/* Integers */

/* Writes the decimal digits of v; the caller reserved 21 bytes. */
static char *
put_integer(char *out, long long v)
{
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *out++ = '-';
    }
    while (n > 0) {
        *out++ = digits[--n];
    }
    return out;
}

static int
write_int(Writer *w, PyObject *value)
{
    int overflow = 0;
    /* value is an exact int, so no __index__ or other Python code runs here. */
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow != 0 || v > JCS_MAX_SAFE_INTEGER || v < -JCS_MAX_SAFE_INTEGER) {
        return fall_back(w, "integer outside -(2^53-1)..2^53-1");
    }
    if (reserve(w, 24) < 0) {
        return -1;
    }
    char *end = put_integer(w->base + w->len, v);
    w->len = end - w->base;
    return 0;
}

/* ------------------------------------------------------------------------------ */
/* Floats: ECMAScript Number::toString */

/* 10**0 .. 10**22, each exactly a double. */
static const double powers_of_ten[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/*
 * The shortest round-trip digits of a non-integral double with 1e-6 <= |x| < 1e15,
 * when they are few, without a general conversion.
 *
 * For p = 1, 2, ... take m, the integer nearest to fl(|x| * 10**p), and test whether
 * the decimal m / 10**p reads back as |x|: the quotient of two exact doubles is
 * correctly rounded, just as reading the decimal text is. While |x| * 10**p < 1e15
 * (< 2**50), the rounding error of the product is at most 1/8 and the interval of
 * decimals that read back as x spans less than 0.25 in units of 10**-p, so m is the
 * only candidate with p decimals: the first p that succeeds gives the shortest
 * digits, and the unique, hence closest, decimal of that length. (p = 0 cannot
 * succeed: integers below 2**53 are doubles of their own.) The decimal m / 10**p is
 * then at least 1e-6, so ECMAScript writes it in plain notation.
 *
 * Returns 1 when it wrote the number, 0 when the caller must use the general
 * conversion, -1 with an exception set.
 */
static int
write_short_decimal(Writer *w, double x, double magnitude)
{
    for (int p = 1; p <= 22; p++) {
        double scaled = magnitude * powers_of_ten[p];
        if (scaled >= 1e15) {
            return 0;
        }
        double nearest = floor(scaled + 0.5);
        if (nearest / powers_of_ten[p] != magnitude) {
            continue;
        }
        char digits[24];
        int ndigits = 0;
        unsigned long long m = (unsigned long long)nearest;
        do {
            digits[ndigits++] = (char)('0' + (int)(m % 10));
            m /= 10;
        } while (m != 0);
        /* Sign, "0.", zeros and digits: at most 1 + 2 + 22 + 16 bytes. */
        if (reserve(w, 48) < 0) {
            return -1;
        }
        char *out = w->base + w->len;
        if (x < 0) {
            *out++ = '-';
        }
        if (ndigits <= p) {
            *out++ = '0';
            *out++ = '.';
            for (int i = ndigits; i < p; i++) {
                *out++ = '0';
            }
        }
        else {
            while (ndigits > p) {
                *out++ = digits[--ndigits];
            }
            *out++ = '.';
        }
        while (ndigits > 0) {
            *out++ = digits[--ndigits];
        }
        w->len = out - w->base;
        return 1;
    }
    return 0;
}

static int
write_float(Writer *w, double x)
{
    if (!isfinite(x)) {
        return fall_back(w, "number is not finite");
    }
    /* Below 2^53 every integer is a double, so an integral value's shortest digits are
       its integer digits, and ECMAScript writes it as an integer ("-0" as "0"). */
    if (x > -9007199254740992.0 && x < 9007199254740992.0) {
        long long integral = (long long)x;
        if ((double)integral == x) {
            if (reserve(w, 24) < 0) {
                return -1;
            }
            char *end = put_integer(w->base + w->len, integral);
            w->len = end - w->base;
            return 0;
        }
    }

    double magnitude = fabs(x);
    if (magnitude >= 1e-6 && magnitude < 1e15) {
        int written = write_short_decimal(w, x, magnitude);
        if (written != 0) {
            return written < 0 ? -1 : 0;
        }
    }

    /* repr's digits are the shortest that round-trip, which are ECMAScript's; only
       their layout differs. */
    char *text = PyOS_double_to_string(x, 'r', 0, 0, NULL);
    if (text == NULL) {
        return -1;
    }
    char digits[32];
    int ndigits = 0;
    int point = 0; /* value == 0.digits * 10**point */
    int seen_point = 0;
    int negative = 0;
    const char *p = text;
    if (*p == '-') {
        negative = 1;
        p++;
    }
    for (; *p != '\0' && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') {
            seen_point = 1;
        }
        else if (*p >= '0' && *p <= '9') {
            if (ndigits == 0 && *p == '0') {
                if (seen_point) {
                    point--;
                }
            }
            else {
                if (ndigits >= (int)sizeof(digits)) {
                    PyMem_Free(text);
                    PyErr_SetString(PyExc_SystemError, "unexpected float repr");
                    return -1;
                }
                digits[ndigits++] = *p;
                if (!seen_point) {
                    point++;
                }
            }
        }
        else {
            PyMem_Free(text);
            PyErr_SetString(PyExc_SystemError, "unexpected float repr");
            return -1;
        }
    }
    if (*p == 'e' || *p == 'E') {
        point += atoi(p + 1);
    }
    PyMem_Free(text);
    while (ndigits > 0 && digits[ndigits - 1] == '0') {
        ndigits--;
    }
    if (ndigits == 0) {
        return write_raw(w, "0", 1);
    }

    /* At most: sign, "0.", 6 zeros and 17 digits; or 21 digits; or d.ddd e+308. */
    if (reserve(w, 48) < 0) {
        return -1;
    }
    char *out = w->base + w->len;
    if (negative) {
        *out++ = '-';
    }
    if (ndigits <= point && point <= 21) {
        memcpy(out, digits, (size_t)ndigits);
        out += ndigits;
        memset(out, '0', (size_t)(point - ndigits));
        out += point - ndigits;
    }
    else if (0 < point && point <= 21) {
        memcpy(out, digits, (size_t)point);
        out += point;
        *out++ = '.';
        memcpy(out, digits + point, (size_t)(ndigits - point));
        out += ndigits - point;
    }
    else if (-6 < point && point <= 0) {
        *out++ = '0';
        *out++ = '.';
        memset(out, '0', (size_t)(-point));
        out += -point;
        memcpy(out, digits, (size_t)ndigits);
        out += ndigits;
    }
    else {
        int exponent = point - 1;
        *out++ = digits[0];
        if (ndigits > 1) {
            *out++ = '.';
            memcpy(out, digits + 1, (size_t)(ndigits - 1));
            out += ndigits - 1;
        }
        *out++ = 'e';
        *out++ = exponent > 0 ? '+' : '-';
        out = put_integer(out, exponent > 0 ? exponent : -exponent);
    }
    w->len = out - w->base;
    return 0;
}

/* ------------------------------------------------------------------------------ */
/* Strings */

static const char hex_digits[] = "0123456789abcdef";

static inline int
needs_escape(unsigned int c)
{
    return c < 0x20 || c == '"' || c == '\\';
}

static inline char *
put_escape(char *out, unsigned int c)
{
    *out++ = '\\';
    switch (c) {
    case '"': *out++ = '"'; break;
    case '\\': *out++ = '\\'; break;
    case '\b': *out++ = 'b'; break;
    case '\t': *out++ = 't'; break;
    case '\n': *out++ = 'n'; break;
    case '\f': *out++ = 'f'; break;
    case '\r': *out++ = 'r'; break;
    default:
        *out++ = 'u';
        *out++ = '0';
        *out++ = '0';
        *out++ = hex_digits[c >> 4];
        *out++ = hex_digits[c & 15];
    }
    return out;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Whether any of 8 bytes may need escaping: below 0x20, '"' or '\\'. There are no
   false negatives; a false positive costs a byte-by-byte look. */
static inline int
may_need_escape(uint64_t v)
{
    uint64_t quote = v ^ (ONES * '"');
    uint64_t backslash = v ^ (ONES * '\\');
    uint64_t found = ((v - ONES * 0x20) & ~v) | ((quote - ONES) & ~quote) |
                     ((backslash - ONES) & ~backslash);
    return (found & HIGHS) != 0;
}

/* Copies fewer than 16 bytes, escaping as JCS says. Whole words are read and written
   where the bytes allow, as two overlapping words of 8 or of 4. */
static char *
put_short(char *out, const unsigned char *s, Py_ssize_t n)
{
    if (n >= 8) {
        uint64_t head, tail;
        memcpy(&head, s, 8);
        memcpy(&tail, s + n - 8, 8);
        if (!may_need_escape(head) && !may_need_escape(tail)) {
            memcpy(out, &head, 8);
            memcpy(out + n - 8, &tail, 8);
            return out + n;
        }
    }
    else if (n >= 4) {
        uint32_t head, tail;
        memcpy(&head, s, 4);
        memcpy(&tail, s + n - 4, 4);
        if (!may_need_escape((uint64_t)head | ((uint64_t)tail << 32))) {
            memcpy(out, &head, 4);
            memcpy(out + n - 4, &tail, 4);
            return out + n;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned int c = s[i];
        if (needs_escape(c)) {
            out = put_escape(out, c);
        }
        else {
            *out++ = (char)c;
        }
    }
    return out;
}

/* SSE2 is part of every x86-64; elsewhere (or built with -DJCS_NO_SSE2) the same
   loop runs on 64-bit words. */
#if !defined(JCS_NO_SSE2) && \
    (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#include <emmintrin.h>
#if defined(_MSC_VER)
#include <intrin.h>
static inline int
lowest_bit(unsigned int mask)
{
    unsigned long index;
    _BitScanForward(&index, mask);
    return (int)index;
}
#else
#define lowest_bit(mask) __builtin_ctz(mask)
#endif

/* A bit per byte of 16 (bit i for byte i) that needs escaping. */
static inline unsigned int
escape_mask(__m128i v)
{
    /* Bytes below 0x20, compared as unsigned by flipping the sign bits. */
    __m128i flipped = _mm_xor_si128(v, _mm_set1_epi8((char)0x80));
    __m128i control = _mm_cmplt_epi8(flipped, _mm_set1_epi8((char)(0x20 ^ 0x80)));
    __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    return (unsigned int)_mm_movemask_epi8(
        _mm_or_si128(control, _mm_or_si128(quote, backslash)));
}

/* Copies UTF-8 bytes, escaping as JCS says; the caller reserved 6 bytes per byte. */
static char *
put_utf8(char *out, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (n - i >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned int mask = escape_mask(v);
        if (mask == 0) {
            _mm_storeu_si128((__m128i *)out, v);
            out += 16;
            i += 16;
            continue;
        }
        int first = lowest_bit(mask);
        memcpy(out, s + i, (size_t)first);
        out = put_escape(out + first, s[i + first]);
        i += first + 1;
    }
    return put_short(out, s + i, n - i);
}

#else

/* Copies UTF-8 bytes, escaping as JCS says; the caller reserved 6 bytes per byte. */
static char *
put_utf8(char *out, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (n - i >= 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        if (may_need_escape(word)) {
            out = put_short(out, s + i, 8);
        }
        else {
            memcpy(out, &word, 8);
            out += 8;
        }
        i += 8;
    }
    return put_short(out, s + i, n - i);
}

#endif

static int
write_str(Writer *w, PyObject *text)
{
    const char *data;
    Py_ssize_t n;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return -1;
    }
#endif
    if (PyUnicode_IS_ASCII(text)) {
        data = (const char *)PyUnicode_DATA(text);
        n = PyUnicode_GET_LENGTH(text);
    }
    else {
        /* CPython keeps this UTF-8 form with the string, so writing the same string
           again costs no second encoding. A string with a lone surrogate has no UTF-8
           form: the reference path rejects it. */
        data = PyUnicode_AsUTF8AndSize(text, &n);
        if (data == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                return -1;
            }
            PyErr_Clear();
            return fall_back(w, "string or key holds a lone surrogate");
        }
    }
    if (reserve(w, 1) < 0) {
        return -1;
    }
    w->base[w->len++] = '"';
    /* Chunks bound the worst case reservation (6 bytes for one escaped byte). */
    Py_ssize_t start = 0;
    do {
        Py_ssize_t stop = n - start > JCS_STRING_CHUNK ? start + JCS_STRING_CHUNK : n;
        if (reserve(w, 6 * (stop - start) + 1) < 0) {
            return -1;
        }
        char *out = put_utf8(w->base + w->len, (const unsigned char *)data + start,
                             stop - start);
        w->len = out - w->base;
        start = stop;
    } while (start < n);
    w->base[w->len++] = '"';
    return 0;
}

/* ------------------------------------------------------------------------------ */
/* Containers */

static int
write_list(Writer *w, PyObject *list, int depth)
{
    if (depth >= JCS_MAX_DEPTH) {
        return fall_back(w, "nesting deeper than MAX_DEPTH");
    }
    if (reserve(w, 2) < 0) {
        return -1;
    }
    w->base[w->len++] = '[';
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        if (i + 4 < PyList_GET_SIZE(list)) {
            prefetch(PyList_GET_ITEM(list, i + 4));
        }
        if (i > 0) {
            if (reserve(w, 1) < 0) {
                return -1;
            }
            w->base[w->len++] = ',';
        }
        if (encode(w, PyList_GET_ITEM(list, i), depth + 1) < 0) {
            return -1;
        }
    }
    if (reserve(w, 1) < 0) {
        return -1;
    }
    w->base[w->len++] = ']';
    return 0;
}

/* UTF-16 code unit order of one differing code point pair: a non-BMP character is a
   high surrogate (D800..DBFF) in UTF-16, so it sorts after U+0000..U+D7FF and before
   U+E000..U+FFFF. Lifting U+E000..U+FFFF above U+10FFFF gives that order. */
static inline Py_UCS4
utf16_rank(Py_UCS4 c)
{
    return c >= 0xE000 && c <= 0xFFFF ? c + 0x110000 : c;
}

static inline int
compare_keys(const Member *a, const Member *b)
{
    Py_ssize_t n = a->len < b->len ? a->len : b->len;
    if (a->kind == PyUnicode_1BYTE_KIND && b->kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *x = (const unsigned char *)a->data;
        const unsigned char *y = (const unsigned char *)b->data;
        /* Keys mostly differ in their first byte. */
        if (n > 0 && x[0] != y[0]) {
            return x[0] < y[0] ? -1 : 1;
        }
        int order = memcmp(x, y, (size_t)n);
        if (order != 0) {
            return order;
        }
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 x = PyUnicode_READ(a->kind, a->data, i);
            Py_UCS4 y = PyUnicode_READ(b->kind, b->data, i);
            if (x != y) {
                return utf16_rank(x) < utf16_rank(y) ? -1 : 1;
            }
        }
    }
    return (a->len > b->len) - (a->len < b->len);
}

static int
compare_members(const void *a, const void *b)
{
    return compare_keys((const Member *)a, (const Member *)b);
}

/* The UTF-16 order of up to JCS_SHAPE_KEYS members, as indexes, from the shape cache
   or by insertion sort (the quickest for so few). */
static int
small_order(Writer *w, const Member *members, Py_ssize_t n, unsigned char *order)
{
    if (n == 1) {
        order[0] = 0;
        return 0;
    }
    if (w->shapes == NULL) {
        w->shapes = PyMem_New(Shape, JCS_SHAPES);
        if (w->shapes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < JCS_SHAPES; i++) {
            w->shapes[i].n = 0;
        }
    }
    size_t hash = (size_t)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        hash = hash * 1000003u ^ ((uintptr_t)members[i].key >> 4);
    }
    Shape *shape = &w->shapes[(hash ^ (hash >> 17)) % JCS_SHAPES];
    if (shape->n == n) {
        Py_ssize_t i = 0;
        while (i < n && shape->keys[i] == members[i].key) {
            i++;
        }
        if (i == n) {
            memcpy(order, shape->order, (size_t)n);
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char index = (unsigned char)i;
        Py_ssize_t j = i;
        while (j > 0 && compare_keys(&members[order[j - 1]], &members[index]) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = index;
    }
    shape->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        shape->keys[i] = members[i].key;
    }
    memcpy(shape->order, order, (size_t)n);
    return 0;
}

static int
write_member(Writer *w, const Member *member, int depth, int first)
{
    if (!first) {
        if (reserve(w, 1) < 0) {
            return -1;
        }
        w->base[w->len++] = ',';
    }
    if (write_str(w, member->key) < 0) {
        return -1;
    }
    if (reserve(w, 1) < 0) {
        return -1;
    }
    w->base[w->len++] = ':';
    return encode(w, member->value, depth + 1);
}

static int
write_members(Writer *w, Member *members, Py_ssize_t n, int depth)
{
    if (n <= JCS_SHAPE_KEYS) {
        unsigned char order[JCS_SHAPE_KEYS];
        if (small_order(w, members, n, order) < 0) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (write_member(w, &members[order[i]], depth, i == 0) < 0) {
                return -1;
            }
        }
        return 0;
    }
    qsort(members, (size_t)n, sizeof(Member), compare_members);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (write_member(w, &members[i], depth, i == 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
write_dict(Writer *w, PyObject *dict, int depth)
{
    if (depth >= JCS_MAX_DEPTH) {
        return fall_back(w, "nesting deeper than MAX_DEPTH");
    }
    Py_ssize_t n = PyDict_GET_SIZE(dict);
    if (reserve(w, 2) < 0) {
        return -1;
    }
    w->base[w->len++] = '{';
    if (n > 0) {
        Member stack_members[JCS_STACK_MEMBERS];
        Member *members = stack_members;
        if (n > JCS_STACK_MEMBERS) {
            members = PyMem_New(Member, (size_t)n);
            if (members == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        Py_ssize_t pos = 0, count = 0;
        PyObject *key, *value;
        int status = 0;
        while (count < n && PyDict_Next(dict, &pos, &key, &value)) {
            if (!PyUnicode_CheckExact(key)) {
                status = fall_back(w, "object key is not an exact str");
                break;
            }
#if PY_VERSION_HEX < 0x030C0000
            if (PyUnicode_READY(key) < 0) {
                status = -1;
                break;
            }
#endif
            prefetch(value);
            Member *m = &members[count++];
            m->data = PyUnicode_DATA(key);
            m->len = PyUnicode_GET_LENGTH(key);
            m->kind = PyUnicode_KIND(key);
            m->key = key;
            m->value = value;
        }
        if (status == 0) {
            status = write_members(w, members, count, depth);
        }
        if (members != stack_members) {
            PyMem_Free(members);
        }
        if (status < 0) {
            return -1;
        }
    }
    if (reserve(w, 1) < 0) {
        return -1;
    }
    w->base[w->len++] = '}';
    return 0;
}

/* ------------------------------------------------------------------------------ */

static int
encode(Writer *w, PyObject *value, int depth)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        return write_str(w, value);
    }
    if (type == &PyDict_Type) {
        return write_dict(w, value, depth);
    }
    if (type == &PyList_Type) {
        return write_list(w, value, depth);
    }
    if (value == Py_True) {
        return write_raw(w, "true", 4);
    }
    if (value == Py_False) {
        return write_raw(w, "false", 5);
    }
    /* Exact int only: bool was handled above and is no exact int anyway. */
    if (type == &PyLong_Type) {
        return write_int(w, value);
    }
    if (type == &PyFloat_Type) {
        return write_float(w, PyFloat_AS_DOUBLE(value));
    }
    if (value == Py_None) {
        return write_raw(w, "null", 4);
    }
    return fall_back(w, "unsupported type or subclass");
}

static PyObject *
jcs_dumps(PyObject *module, PyObject *value)
{
    jcs_state *state = (jcs_state *)PyModule_GetState(module);
    Writer w;
    w.cap = 256;
    w.len = 0;
    w.fallback = state->fallback;
    w.bytes = PyBytes_FromStringAndSize(NULL, w.cap);
    if (w.bytes == NULL) {
        return NULL;
    }
    w.base = PyBytes_AS_STRING(w.bytes);
    w.shapes = NULL;
    int status = encode(&w, value, 0);
    PyMem_Free(w.shapes);
    if (status < 0) {
        Py_XDECREF(w.bytes);
        return NULL;
    }
    if (_PyBytes_Resize(&w.bytes, w.len) < 0) {
        return NULL;
    }
    return w.bytes;
}

PyDoc_STRVAR(jcs_dumps_doc,
"dumps(value, /)\n--\n\n"
"Return the RFC 8785 canonical JSON bytes of value.\n\n"
"Only exact dict (str keys), list, str, int, float, bool and None are written.\n"
"Raises Fallback, having written nothing, for any other type or subclass, NaN or\n"
"infinities, integers outside -(2^53-1)..2^53-1, lone surrogates, non-str keys and\n"
"nesting deeper than MAX_DEPTH.");

static PyMethodDef jcs_methods[] = {
    {"dumps", jcs_dumps, METH_O, jcs_dumps_doc},
    {NULL, NULL, 0, NULL},
};

static int
jcs_exec(PyObject *module)
{
    jcs_state *state = (jcs_state *)PyModule_GetState(module);
    state->fallback = PyErr_NewExceptionWithDoc(
        "bundler._jcs.Fallback",
        "dumps cannot write this value itself; the reference serialiser decides.",
        PyExc_Exception, NULL);
    if (state->fallback == NULL) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "Fallback", state->fallback) < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "MAX_DEPTH", JCS_MAX_DEPTH) < 0) {
        return -1;
    }
    return 0;
}

static int
jcs_traverse(PyObject *module, visitproc visit, void *arg)
{
    jcs_state *state = (jcs_state *)PyModule_GetState(module);
    Py_VISIT(state->fallback);
    return 0;
}

static int
jcs_clear(PyObject *module)
{
    jcs_state *state = (jcs_state *)PyModule_GetState(module);
    Py_CLEAR(state->fallback);
    return 0;
}

static void
jcs_free(void *module)
{
    jcs_clear((PyObject *)module);
}

static PyModuleDef_Slot jcs_slots[] = {
    {Py_mod_exec, jcs_exec},
    {0, NULL},
};

PyDoc_STRVAR(jcs_doc,
"RFC 8785 (JCS) serialisation of exact JSON types; see bundler.canonical.");

static struct PyModuleDef jcs_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bundler._jcs",
    .m_doc = jcs_doc,
    .m_size = sizeof(jcs_state),
    .m_methods = jcs_methods,
    .m_slots = jcs_slots,
    .m_traverse = jcs_traverse,
    .m_clear = jcs_clear,
    .m_free = jcs_free,
};

PyMODINIT_FUNC
PyInit__jcs(void)
{
    return PyModuleDef_Init(&jcs_module);
}
