//! `nginx-probe`: the binary. Everything lives in the library; see [`nginx_probe::cli`].

fn main() {
    nginx_probe::cli::main()
}
