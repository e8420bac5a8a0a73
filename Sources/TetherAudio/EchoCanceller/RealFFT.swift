import CFFTW
import Synchronization

/// A real-to-complex FFT and its inverse of one even size, planned once with FFTW (single
/// precision), run on caller-owned buffers from `RealFFT.allocateReal` / `allocateComplex`.
///
/// Why FFTW: Debian packages it (libfftw3-dev), it handles the sizes the canceller needs
/// (960 = 2⁶·3·5 and 480 points, 10 and 5 ms at 48 kHz) without padding to a power of two, and its
/// "new-array" execute calls are safe from any thread and neither allocate nor lock, so one plan
/// serves every call on the realtime path. Planning is not thread-safe in FFTW, so plans are made
/// under one process-wide lock (in `init`, off the realtime path).
///
/// Spectra are `size / 2 + 1` complex bins, interleaved (re, im) floats. `forward` is unscaled;
/// `inverse` is unscaled too (a round trip multiplies by `size`). Both may destroy their input
/// (`FFTW_DESTROY_INPUT`, which lets FFTW pick faster plans): callers pass scratch copies.
final class RealFFT: @unchecked Sendable {
    let size: Int
    /// Complex bins of a spectrum: `size / 2 + 1`.
    var bins: Int { size / 2 + 1 }
    private let forwardPlan: fftwf_plan
    private let inversePlan: fftwf_plan

    /// FFTW's planner is not thread-safe: one planning at a time in the process.
    private static let planning = Mutex<Void>(())

    init(size: Int) {
        precondition(size >= 2 && size % 2 == 0, "RealFFT needs an even size")
        self.size = size
        let time = Self.allocateReal(size)
        let frequency = Self.allocateComplex(bins: size / 2 + 1)
        defer {
            fftwf_free(time)
            fftwf_free(frequency)
        }
        let complex = UnsafeMutableRawPointer(frequency).assumingMemoryBound(to: fftwf_complex.self)
        let flags = UInt32(FFTW_ESTIMATE) | UInt32(FFTW_DESTROY_INPUT)
        var plans: (forward: fftwf_plan?, inverse: fftwf_plan?) = (nil, nil)
        Self.planning.withLock { _ in
            plans = (
                fftwf_plan_dft_r2c_1d(Int32(size), time, complex, flags),
                fftwf_plan_dft_c2r_1d(Int32(size), complex, time, flags)
            )
        }
        forwardPlan = plans.forward!
        inversePlan = plans.inverse!
    }

    deinit {
        Self.planning.withLock { _ in
            fftwf_destroy_plan(forwardPlan)
            fftwf_destroy_plan(inversePlan)
        }
    }

    /// `size` real samples in (may be overwritten), `bins` complex out.
    func forward(_ input: UnsafeMutablePointer<Float>, _ output: UnsafeMutablePointer<Float>) {
        fftwf_execute_dft_r2c(
            forwardPlan, input, UnsafeMutableRawPointer(output).assumingMemoryBound(to: fftwf_complex.self))
    }

    /// `bins` complex in (overwritten), `size` real out.
    func inverse(_ input: UnsafeMutablePointer<Float>, _ output: UnsafeMutablePointer<Float>) {
        fftwf_execute_dft_c2r(
            inversePlan, UnsafeMutableRawPointer(input).assumingMemoryBound(to: fftwf_complex.self), output)
    }

    /// Zeroed real samples, aligned as FFTW's plans expect. Free with `RealFFT.free`.
    static func allocateReal(_ count: Int) -> UnsafeMutablePointer<Float> {
        let pointer = fftwf_alloc_real(count)!
        pointer.initialize(repeating: 0, count: count)
        return pointer
    }

    /// A zeroed spectrum of `bins` interleaved complex values (2 × `bins` floats), aligned.
    static func allocateComplex(bins: Int) -> UnsafeMutablePointer<Float> {
        allocateReal(2 * bins)
    }

    static func free(_ pointer: UnsafeMutablePointer<Float>) {
        fftwf_free(pointer)
    }
}
