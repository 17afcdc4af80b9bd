//! Containment of stdio servers: each server's effective profile (files, network, environment),
//! its enforcement through a platform seam, and the egress proxy that lets a confined server
//! reach the hosts its profile allows.

pub mod proxy;
