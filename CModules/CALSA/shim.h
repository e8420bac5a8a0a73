// CALSA: libasound (ALSA), used by the audio device layer.
#ifndef TETHER_CALSA_SHIM_H
#define TETHER_CALSA_SHIM_H
#include <alsa/asoundlib.h>
#endif
