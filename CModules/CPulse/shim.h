// CPulse: libpulse (PulseAudio asynchronous API), used by the audio device layer.
#ifndef TETHER_CPULSE_SHIM_H
#define TETHER_CPULSE_SHIM_H
#include <pulse/pulseaudio.h>
#endif
