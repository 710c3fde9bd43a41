//! Finding a wgpu adapter before CubeCL does.
//!
//! Without a Vulkan driver, cubecl-wgpu panics on its device thread ("No possible adapter") and
//! the caller only sees a `RecvError`. [`wgpu_adapter`] asks wgpu first and returns an error that
//! says what to install.

/// No wgpu adapter could be found.
#[derive(Debug, thiserror::Error)]
#[error(
    "no wgpu adapter found: install a Vulkan driver (on Debian without a GPU: \
     `apt-get install -y mesa-vulkan-drivers libvulkan1` for Mesa's lavapipe), \
     or choose `--backend ndarray`"
)]
pub struct NoAdapter;

/// The name and driver of the adapter cubecl-wgpu would pick, or [`NoAdapter`].
///
/// Asks the graphics API cubecl-wgpu itself uses (`AutoGraphicsApi`: Vulkan on Linux), not every
/// backend wgpu knows: with Vulkan hidden, an OpenGL adapter would pass a broader check while
/// cubecl still panics.
pub fn wgpu_adapter() -> Result<String, NoAdapter> {
    use cubecl::wgpu::{AutoGraphicsApi, GraphicsApi};
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: AutoGraphicsApi::backend().into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
    }))
    .map_err(|_| NoAdapter)?;
    let info = adapter.get_info();
    Ok(format!(
        "{} ({:?}, {})",
        info.name, info.backend, info.driver
    ))
}
