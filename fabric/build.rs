//! Compiles `proto/*.proto` without a system `protoc`: `protox` parses the
//! files into a descriptor set and `tonic-prost-build` generates the prost
//! messages and the tonic client and server from it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/fabric.proto"];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .bytes(".")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
