//! TEMP stub, replaced by the simulator branch.
use std::net::SocketAddr;
use std::path::PathBuf;
pub const DEFAULT_KEY: &str = "xx_sim_default_key";
#[derive(Default)]
pub struct SimConfig {
    pub state: Option<PathBuf>,
}
pub struct SimHandle;
impl SimHandle {
    pub fn base_url(&self) -> String {
        String::new()
    }
}
pub async fn start(_c: SimConfig, _a: SocketAddr) -> Result<SimHandle, String> {
    Ok(SimHandle)
}
