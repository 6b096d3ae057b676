"""Infrastructure every layer may use: hashing embedder, FAISS index, atomic io, ledger, checkpoints,
progress bars, the world cache and the paired task-bootstrap statistics (:mod:`.stats`). Nothing here
imports a domain, a method, ``cfjax.llm`` or ``cfjax.experiments``."""
