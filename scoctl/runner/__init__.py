"""The composers, above the stages: one pass of steps (`compose`) that ``run --once``,
``run --interval`` (`loop`) and ``run --follow`` (`controller`, which only decides *when* a step
is due) all drive, with one dependencies object; the one signal handling and `serve` (`serve`).
"""
