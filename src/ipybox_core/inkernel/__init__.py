"""Code that runs inside the kernel (shipped into a gateway kernel as source).

- :mod:`.runtime`: the client generated code calls tools with (documented as ``ipybox_core.runtime``,
  the same module object);
- :mod:`.errors`: the exceptions kernel code can get (re-exported by ``ipybox_core.errors``);
- :mod:`._bootstrap`: executed in every kernel at start (output caps, shell approval);
- :mod:`._gateway_setup`: executed in a gateway kernel to receive the runtime and packages;
- :mod:`._sandbox_boot`: passed to ``python -c`` inside the sandbox (limits, uid switch);
- :mod:`._generated_base`: copied into each generated package as ``_base.py``.

Standard library only, so that it works in any kernel environment; :mod:`._generated_base` alone
also imports pydantic (generated models need it). ``tests/core/inkernel`` imports every module in
a bare interpreter and fails on any other import.
"""
