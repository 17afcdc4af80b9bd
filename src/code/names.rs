//! Tools as a program sees them: identifiers for the attribute form and signatures.
