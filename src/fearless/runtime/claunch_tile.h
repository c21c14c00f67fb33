/* The Tile track's compiled launches (claunch_tile.c): methods of the module (claunch.c). */
#ifndef FEARLESS_CLAUNCH_TILE_H
#define FEARLESS_CLAUNCH_TILE_H

#include "claunch_common.h"

FL_INTERNAL PyObject *tile_plan(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *tile_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
FL_INTERNAL PyObject *tile_warm_plan(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *tile_warm(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
FL_INTERNAL PyObject *tile_warm_forget(PyObject *self, PyObject *capsule);
FL_INTERNAL int tile_intern(void);

#endif
