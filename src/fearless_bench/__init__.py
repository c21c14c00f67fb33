"""The benchmark suite behind `fearless bench` (DESIGN section 6): every case, every peer.

A top-level package beside fearless, out of the core: fearless imports it only inside
`fearless bench` (cli/bench.py), and `pip install 'fearless[bench]'` brings its peers' packages.

    suite.py             selects cases, runs the families (GPU, or dry on the simulator), reports
    model.py             Record, implementation names, the ratio to the best peer
    harness.py           one device case: build, poison, check, time each implementation
    timing.py            CUDA-event timing with an L2 flush; host time per launch; budgets
    check.py             relative error against float64, per-dtype thresholds
    peers.py             which peers this machine has, and why a missing one is missing
    env.py               GPU, driver, clocks and package versions
    report.py            results.json, results.md
    figures.py           results.png (summary heatmap) and results_<family>.png
    models_figures.py    results_models_<model>.png: the models family's bars per model
    dry.py               the dry run's compile-simulate-check step
    family_*.py          one module per case family: elementwise, reduce, rows, transpose,
                         gemm, shapes, ops (with family_ops_dry.py), launch, compile (with
                         compile_probe.py), tuning (with tuning_probe.py), models (with
                         models_configs.py and models_probe.py): the last three's probes run
                         in fresh processes (fresh_process.py)
    kernels_simt.py      SIMT kernels the cases need beyond examples/simt_kernels.py
    kernels_cuda.py      CUDA C++ twins of the SIMT kernels (NVRTC, cuda.core launch)
    kernels_triton.py    Triton peers
    kernels_cutile.py    cuTile Python peers
    tile_track.py        calling examples/tile_kernels.py from the cases

Importing this package imports no GPU library; each peer is imported when a case needs it.
"""
