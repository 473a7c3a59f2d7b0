// The scale add_fwd multiplies by: a header, so that tests can edit it and see a reload.
#pragma once
#define ADD_SCALE 1.0
