/* What claunch.c (SIMT plans, the module) and claunch_tile.c (Tile launches) share. */
#ifndef FEARLESS_CLAUNCH_H
#define FEARLESS_CLAUNCH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);

enum {
    K_ARR1 = 1, K_ARR2 = 2,
    K_I8 = 10, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_U64, K_F32, K_F64,
    K_BOOL = 30, K_PTR = 31 /* Tile launches (claunch_tile.c) */
};

/* shared between the two sources of one extension module, exported by neither */
#define FL_INTERNAL __attribute__((visibility("hidden")))

FL_INTERNAL int as_ssize(PyObject *t, Py_ssize_t i, Py_ssize_t *out);
FL_INTERNAL int *int_rows(PyObject *rows, int width, int limit);
FL_INTERNAL int attr_long(PyObject *o, PyObject *name, int call, long long *out);
FL_INTERNAL int pack_int(char *slot, int kind, PyObject *v);
FL_INTERNAL int pack_float(char *slot, int kind, PyObject *v);

/* interned attribute names (claunch.c) */
extern FL_INTERNAL PyObject *s_ptr, *s_dtype, *s_on_device, *s_moved, *s_shape;
extern FL_INTERNAL PyObject *s_tshape, *s_tdtype, *s_get_device, *s_is_contiguous, *s_data_ptr;

/* claunch_tile.c */
FL_INTERNAL PyObject *tile_plan(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *tile_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
FL_INTERNAL PyObject *tile_warm_plan(PyObject *self, PyObject *args);
FL_INTERNAL PyObject *tile_warm(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
FL_INTERNAL int tile_intern(void);

#endif
