# Tether: the two commands in README.md are `make demo` and `make test`.
SWIFT ?= swift
TSAN_SCRATCH ?= .build-tsan

.PHONY: setup build demo test test-unit test-tsan bench format clean

setup:
	@./scripts/setup-debian.sh

build: setup
	$(SWIFT) build -c release

# The embedded default: two sessions over real ICE on 127.0.0.1 with a test signal.
demo: setup
	$(SWIFT) run -c release tether demo

# Everything CI runs: the whole suite, then the cross-thread code (rings, the libnice thread,
# device threads) again under the thread sanitizer.
test: setup test-unit test-tsan

test-unit:
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel

test-tsan:
	$(SWIFT) test --scratch-path $(TSAN_SCRATCH) --sanitize=thread --no-parallel --filter 'TetherRealtimeTests|TetherICETests|TetherAudioTests|TetherFaultsTests|TetherNetworkMonitorTests'

bench: setup
	$(SWIFT) run -c release tether-bench

format:
	$(SWIFT) format --in-place --recursive Sources Tests Benchmarks Package.swift

clean:
	rm -rf .build $(TSAN_SCRATCH)

# Real-device tests (PulseAudio/ALSA through a private daemon); not yet part of `make test`.
test-devices:
	scripts/with-test-audio.sh $(SWIFT) test --skip-build --no-parallel --filter 'PulseAudio|ALSA|DeviceCallTests'
