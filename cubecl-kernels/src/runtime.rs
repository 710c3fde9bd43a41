//! Finding a wgpu adapter before CubeCL does, and telling a GPU from a CPU running the kernels.
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

/// The wgpu devices Burn can open here, one per adapter of the graphics API cubecl-wgpu uses,
/// by Burn's names (`DiscreteGpu(i)`, `IntegratedGpu(i)`, `VirtualGpu(i)`, `Cpu`), GPUs first;
/// [`NoAdapter`] when there is none.
///
/// A machine whose only adapter is a software one (Mesa's lavapipe) gets a second device,
/// `DefaultDevice`: Burn opens it as its own Vulkan device and CubeCL server on the same
/// adapter, so multi-device training can be run and checked without a GPU (both share the
/// host's cores: a check, not a speed-up).
pub fn wgpu_devices() -> Result<Vec<cubecl::wgpu::WgpuDevice>, NoAdapter> {
    use cubecl::wgpu::{AutoGraphicsApi, GraphicsApi, WgpuDevice};
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: AutoGraphicsApi::backend().into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapters =
        pollster::block_on(instance.enumerate_adapters(AutoGraphicsApi::backend().into()));
    let types: Vec<wgpu::DeviceType> = adapters.iter().map(|a| a.get_info().device_type).collect();
    let mut devices = devices_of(&types);
    if devices.is_empty() {
        return Err(NoAdapter);
    }
    if devices == [WgpuDevice::Cpu] {
        devices.push(WgpuDevice::DefaultDevice);
    }
    Ok(devices)
}

/// Burn's device names for adapters of these types (GPUs by type and index, then one `Cpu`).
fn devices_of(types: &[wgpu::DeviceType]) -> Vec<cubecl::wgpu::WgpuDevice> {
    use cubecl::wgpu::WgpuDevice;
    use wgpu::DeviceType;
    let count = |t: DeviceType| types.iter().filter(|&&x| x == t).count();
    let mut devices = Vec::new();
    devices.extend((0..count(DeviceType::DiscreteGpu)).map(WgpuDevice::DiscreteGpu));
    devices.extend((0..count(DeviceType::IntegratedGpu)).map(WgpuDevice::IntegratedGpu));
    devices.extend((0..count(DeviceType::VirtualGpu)).map(WgpuDevice::VirtualGpu));
    if count(DeviceType::Cpu) > 0 {
        devices.push(WgpuDevice::Cpu);
    }
    devices
}

/// Units of a cube in the kernel tiles written for a CPU running the kernels (the GEMM's and the
/// BSpMM's direct tiles): one SIMD vector of f32 on lavapipe, which runs a cube's units as the
/// lanes of one CPU thread.
pub const SIMD_UNITS: usize = 8;

/// Whether the device behind `client` is a GPU: it reports multiprocessors (CUDA) or plane
/// operations (wgpu reports no multiprocessors for any adapter, and enables plane operations for
/// every adapter with subgroups but a CPU). A CPU running the kernels (lavapipe) gets the direct
/// tiles of the GEMM and the BSpMM, a GPU the staged ones.
pub fn is_gpu<R: burn_cubecl::CubeRuntime>(client: &cubecl::client::ComputeClient<R>) -> bool {
    let props = client.properties();
    props.hardware.num_streaming_multiprocessors.is_some()
        || props.features.plane.contains(cubecl::features::Plane::Ops)
}

/// Multiprocessors assumed for a GPU that does not report its count (wgpu reports none).
pub const UNKNOWN_GPU_UNITS: usize = 32;

/// The multiprocessors of the device behind `client`: the count CUDA reports,
/// [`UNKNOWN_GPU_UNITS`] for another GPU ([`is_gpu`]), 0 for a CPU running the kernels.
pub fn gpu_units<R: burn_cubecl::CubeRuntime>(client: &cubecl::client::ComputeClient<R>) -> usize {
    match client.properties().hardware.num_streaming_multiprocessors {
        Some(n) => n as usize,
        None if is_gpu(client) => UNKNOWN_GPU_UNITS,
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubecl::wgpu::WgpuDevice;
    use wgpu::DeviceType;

    #[test]
    fn adapters_map_to_burns_device_names() {
        let types = [
            DeviceType::Cpu,
            DeviceType::DiscreteGpu,
            DeviceType::IntegratedGpu,
            DeviceType::DiscreteGpu,
            DeviceType::Other,
        ];
        assert_eq!(
            devices_of(&types),
            vec![
                WgpuDevice::DiscreteGpu(0),
                WgpuDevice::DiscreteGpu(1),
                WgpuDevice::IntegratedGpu(0),
                WgpuDevice::Cpu,
            ]
        );
        assert!(devices_of(&[DeviceType::Other]).is_empty());
    }
}
