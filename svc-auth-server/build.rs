//! `sqlx::migrate!` embeds the migration files at compile time; a file added to the folder must
//! rebuild the binary.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
