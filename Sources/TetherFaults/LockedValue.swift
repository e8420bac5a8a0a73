import Glibc

/// A value behind a `pthread_mutex_t`, for state the relay's thread and its controllers share.
///
/// Not `Synchronization.Mutex`: on Linux its contended path takes the lock in the kernel (a
/// priority-inheritance futex), where ThreadSanitizer cannot see the acquisition, so two accesses
/// that both held the lock read as a race once they contended (seen in CI: `updateImpairments`
/// from the control thread against the relay thread's `handle`, exit 66 from the TSan build of
/// `tether-relay`). ThreadSanitizer intercepts `pthread_mutex_lock`, so this lock is one it
/// understands. The relay is test and bench infrastructure; nothing on Tether's media path uses it.
final class LockedValue<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: consuming Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the lock held.
    func withLock<Result: ~Copyable>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
