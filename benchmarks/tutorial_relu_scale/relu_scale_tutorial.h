// Included by relu_scale_tutorial.cu only. benchmarks/jit_loop.py rewrites this define (in a
// temporary copy) to measure what a header edit costs and whether the reload picks it up.
#pragma once
#define TUTORIAL_OFFSET 0.0f
