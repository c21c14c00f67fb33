/* Prepared SIMT launches, in C (claunch_prepared.c): methods of the module (claunch.c). */
#ifndef FEARLESS_CLAUNCH_PREPARED_H
#define FEARLESS_CLAUNCH_PREPARED_H

#include "claunch_common.h"

FL_INTERNAL PyObject *prepared_bind(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *prepared_run(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
FL_INTERNAL int prepared_intern(void);

#endif
