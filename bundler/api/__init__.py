"""The library face's implementation: one function per command (SPEC 7.1).

``bundler`` re-exports these; the command line parses its options, calls one of them
and prints the result. ``params`` checks what a caller passes, ``anchors`` turns the
trust anchors into verifier options, ``results`` holds the frozen results,
``bundles`` and ``stored`` the functions.
"""
