//! Rewrites on an e-graph (egg).
