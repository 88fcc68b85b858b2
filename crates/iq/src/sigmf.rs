//! SigMF: filled below
