/* The compiled warm launcher's module, `_fearless_claunch` (built when fearless is installed,
 * setup.py, else by runtime/claunch.py at first use, as Triton builds its launcher): its method table and its init, over the units that
 * define the methods (claunch_common.h lists them). SIMT plans: claunch_simt.c; prepared SIMT
 * launches: claunch_prepared.c; Tile launches: claunch_tile.c; the default stream:
 * claunch_streams.c; DLPack reads for ops/_replay.py and the tests: claunch_common.c.
 */
#include "claunch_common.h"
#include "claunch_prepared.h"
#include "claunch_simt.h"
#include "claunch_streams.h"
#include "claunch_tile.h"

static PyMethodDef methods[] = {
    {"make_plan", simt_make_plan, METH_VARARGS, "A launch plan (see claunch.py)."},
    {"launch", (PyCFunction)(void (*)(void))simt_launch, METH_FASTCALL, "Check, pack and launch."},
    {"dl_view", dl_view, METH_VARARGS, "dl_read on a CPU tensor, for tests."},
    {"torch_key", torch_key, METH_O, "A tensor's pointer and replay key part, via DLPack."},
    {"tile_plan", tile_plan, METH_VARARGS, "A Tile launch plan (see claunch.py)."},
    {"tile_launch", (PyCFunction)(void (*)(void))tile_launch, METH_FASTCALL,
     "Pack a Tile launch's values and launch."},
    {"tile_warm_plan", tile_warm_plan, METH_VARARGS, "A Tile warm path (see claunch.py)."},
    {"tile_warm", (PyCFunction)(void (*)(void))tile_warm, METH_FASTCALL,
     "Key, look up, check and launch a warm Tile launch."},
    {"tile_warm_forget", tile_warm_forget, METH_O, "Forget a warm path's last entry."},
    {"use_streams", use_streams, METH_VARARGS, "Decide default streams from streams.py's globals."},
    {"bind", prepared_bind, METH_VARARGS, "A prepared SIMT launch (see claunch_prepared.c)."},
    {"run", (PyCFunction)(void (*)(void))prepared_run, METH_FASTCALL, "Launch a prepared SIMT launch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fearless_claunch", NULL, -1, methods};

/* The tag of the sources it was built from (claunch_units.py's `tag`), set by the build that
 * installs it with fearless (setup.py); a build at first use is named by its tag instead. */
#ifndef FEARLESS_CLAUNCH_TAG
#define FEARLESS_CLAUNCH_TAG ""
#endif

PyMODINIT_FUNC PyInit__fearless_claunch(void) {
    if (common_intern() < 0 || streams_intern() < 0 || prepared_intern() < 0 ||
        tile_intern() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "TAG", FEARLESS_CLAUNCH_TAG) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
