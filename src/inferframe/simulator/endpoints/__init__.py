"""Route modules of the simulator; each exposes ``register(app, state)``.

Add an endpoint family (e.g. a future ``files``/``batches`` module) by writing a
module with ``register(app: web.Application, state: SimState) -> None`` and
passing it to ``create_app(extra_modules=[module])``.
"""
