"""Trust: the RFC 6962 case tree, OpenSSH SSHSIG signatures, bundle heads and single-case proofs."""
