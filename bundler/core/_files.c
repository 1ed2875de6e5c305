/*
 * bundler.core._files: many new files written with the GIL released for the whole batch.
 *
 * write_new(items) takes a list of (path: str, data: bytes) and creates each file with
 * O_CREAT | O_EXCL (never over one), writing all of its bytes, in order. An import stages
 * tens of thousands of small files; the kernel spends 50 to 300 us creating each, and a
 * thread that took the GIL back after every system call would wait on the thread parsing
 * the run for each (a switch interval, 5 ms, at worst): this releases it once a batch.
 *
 * Every path is encoded and every data buffer pinned (the items are copied into a tuple
 * that holds them) before the GIL is released, so nothing Python owns is touched without
 * it. The first failure stops the batch: OSError naming that path, the files written
 * before it left in place for the caller's staging directory to remove.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int
write_all(int fd, const char *data, Py_ssize_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, (size_t)size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        size -= n;
    }
    return 0;
}

static PyObject *
files_write_new(PyObject *module, PyObject *items)
{
    (void)module;
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "write_new takes a list of (path, bytes)");
        return NULL;
    }
    PyObject *held = PyList_AsTuple(items);
    if (held == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    PyObject **paths = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    if (paths == NULL) {
        Py_DECREF(held);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(held, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2
            || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "write_new takes a list of (path, bytes)");
            goto done;
        }
        paths[i] = PyUnicode_EncodeFSDefault(PyTuple_GET_ITEM(item, 0));
        if (paths[i] == NULL)
            goto done;
    }
    Py_ssize_t failed = -1;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < n; i++) {
        PyObject *data = PyTuple_GET_ITEM(PyTuple_GET_ITEM(held, i), 1);
        int fd = open(PyBytes_AS_STRING(paths[i]), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                      0666);
        if (fd < 0) {
            error = errno;
            failed = i;
            break;
        }
        int bad = write_all(fd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
        int written_errno = errno;
        if (close(fd) != 0 && !bad) {
            bad = 1;
            written_errno = errno;
        }
        if (bad) {
            error = written_errno;
            failed = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (failed >= 0) {
        errno = error;
        PyErr_SetFromErrnoWithFilenameObject(
            PyExc_OSError, PyTuple_GET_ITEM(PyTuple_GET_ITEM(held, failed), 0));
        goto done;
    }
    result = PyLong_FromSsize_t(n);
done:
    for (i = 0; i < n; i++)
        Py_XDECREF(paths[i]);
    PyMem_Free(paths);
    Py_DECREF(held);
    return result;
}

static PyMethodDef files_methods[] = {
    {"write_new", files_write_new, METH_O,
     "write_new(items) -> int: create each (path, bytes) as a new file, GIL released."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot files_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef files_module = {
    PyModuleDef_HEAD_INIT,
    "bundler.core._files",
    "Many new files written with the GIL released for the whole batch.",
    0,
    files_methods,
    files_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__files(void)
{
    return PyModuleDef_Init(&files_module);
}
