"""Infrastructure every layer may use: hashing embedder, FAISS index, atomic io, ledger, checkpoints,
progress bars and the world cache. Nothing here imports a domain or a method."""
