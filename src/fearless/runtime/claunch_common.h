/* What every compiled launcher shares (claunch_common.c defines it): the Python and C headers,
 * the kinds of packed values, tuple and attribute readers, scalar packing, the capsules that
 * own a plan, and a tensor read through DLPack's C ABI. The units of the module and what each
 * includes, lowest first (runtime/claunch.py builds them into one module):
 *   claunch_common   (this)
 *   claunch_streams  the default stream and a launch's function, as streams.py decides them
 *   claunch_simt     SIMT launch plans            claunch_tile  Tile launches and warm path
 *   claunch_prepared prepared SIMT launches (over claunch_simt)
 *   claunch.c        the module: its method table and init, over all of them
 * No unit includes or calls one above it (tools/check_imports.py holds it). */
#ifndef FEARLESS_CLAUNCH_COMMON_H
#define FEARLESS_CLAUNCH_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
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

/* shared between the sources of one extension module, exported by none */
#define FL_INTERNAL __attribute__((visibility("hidden")))

FL_INTERNAL int as_ssize(PyObject *t, Py_ssize_t i, Py_ssize_t *out);
FL_INTERNAL int *int_rows(PyObject *rows, int width, int limit);
FL_INTERNAL int copy_params(char *buffer, void **kernel_params, unsigned long long address,
                            Py_ssize_t size, PyObject *offsets);
FL_INTERNAL void *plan_arg(PyObject *const *a, Py_ssize_t nargs, Py_ssize_t want,
                           const char *name, const char *capsule);
/* A capsule named `name` that owns `p`: `release(p)` runs when it is freed, or at once, with NULL
 * returned, when it cannot be made (the one destructor of every plan). */
FL_INTERNAL PyObject *owning_capsule(void *p, const char *name, void (*release)(void *));
FL_INTERNAL Py_ssize_t slot_offset(PyObject *type, const char *name);
FL_INTERNAL int attr_is(PyObject *o, PyObject *name, int call, PyObject *want);
FL_INTERNAL int attr_long(PyObject *o, PyObject *name, int call, long long *out);
FL_INTERNAL int pack_int(char *slot, int kind, PyObject *v);
FL_INTERNAL int pack_float(char *slot, int kind, PyObject *v);

/* DLPack's C ABI as its specification defines it (DLPack 1.2+): a tensor described in place,
 * and the exchange table a framework puts on its tensor type as `__dlpack_c_exchange_api__`
 * (torch >= 2.10). Only the members read here are named; the layout is the ABI's. */
typedef struct { int32_t device_type, device_id; } DLDeviceABI;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataTypeABI;
typedef struct {
    void *data;
    DLDeviceABI device;
    int32_t ndim;
    DLDataTypeABI dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensorABI;
typedef struct {
    struct { uint32_t major, minor; } version;
    void *prev_api;
    void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync,
        *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensorABI *out);
    void *current_work_stream;
} DLExchangeABI;

/* dl_read's verdicts */
enum { DL_REFUSED = 0, DL_OK = 1, DL_NONE = -1 };
FL_INTERNAL int dl_read(PyObject *o, int want, long device, long long *ptr, DLTensorABI *t);
FL_INTERNAL PyObject *dl_shape(const DLTensorABI *t);

/* Autograd's rule for a kernel's write to argument `o`, as runtime/arrays.py's torch_write
 * keeps it: `o` is a torch tensor, or an fl.Tensor (of `tensor_type`, its `_owner` slot at
 * `owner_off`) made over one, through fl.Tensors over fl.Tensors. Returns the torch tensor
 * written (borrowed: `o` holds it), Py_None when the memory is not torch's, or NULL when the
 * Python path must decide: a tensor that requires grad, in grad mode (a leaf is refused
 * there, with the error), or a failed read (an exception may be set). */
FL_INTERNAL PyObject *torch_write(PyObject *o, PyObject *tensor_type, Py_ssize_t owner_off);
/* After a launch: bump the version counters of the `n` torch tensors it wrote, as an in-place
 * op does (errors cleared: the kernel ran). */
FL_INTERNAL void bump_versions(PyObject *const *written, int n);

/* torch_key(tensor) and dl_view(tensor, want, device): methods of the module (claunch.c) */
FL_INTERNAL PyObject *torch_key(PyObject *self, PyObject *o);
FL_INTERNAL PyObject *dl_view(PyObject *self, PyObject *args);

/* interned attribute names of a torch.Tensor, made by common_intern */
extern FL_INTERNAL PyObject *s_tshape, *s_tdtype, *s_get_device, *s_is_contiguous, *s_data_ptr;
FL_INTERNAL int common_intern(void);

#endif
