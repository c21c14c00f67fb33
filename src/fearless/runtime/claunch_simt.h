/* SIMT launch plans, in C (claunch_simt.c). */
#ifndef FEARLESS_CLAUNCH_SIMT_H
#define FEARLESS_CLAUNCH_SIMT_H

#include "claunch_common.h"

/* A SIMT plan, and its checks, packing and launch of args[first:] */
typedef struct Plan Plan;
FL_INTERNAL long simt_pack_launch(Plan *p, PyObject *args, Py_ssize_t first, void *fn,
                                  void *fast, const unsigned *dims, long long nthreads,
                                  unsigned long long stream);
/* make_plan(...) and launch(...): methods of the module (claunch.c) */
FL_INTERNAL PyObject *simt_make_plan(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *simt_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs);

#endif
