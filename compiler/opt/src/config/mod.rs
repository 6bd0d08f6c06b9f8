//! The static choice of a kernel's configuration.
