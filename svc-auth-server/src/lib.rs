//! The svc identity plane: `svc.auth.v1.AuthService` over PostgreSQL with row-level security.
