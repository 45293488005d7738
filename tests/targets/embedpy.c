/* SPDX-License-Identifier: MIT */
/*
 * A C program that loads CPython late, as an application embedding Python does: native_spin for
 * SPIN seconds of CPU (no libpython mapped: the profiler finds no interpreter then), then
 * python_phase: dlopen of LIBPYTHON, Py_Initialize with PYTHONHOME set to HOME, and a Python loop
 * calling embedded_hot for PY seconds. The profiler must find the interpreter after the load
 * (its maps changed) and name the Python frames from then on.
 *
 *   embedpy LIBPYTHON HOME SPIN PY
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long native_spin(double secs)
{
	double end = cpu_now() + secs;
	volatile unsigned long x = 0;

	while (cpu_now() < end)
		for (int i = 0; i < 10000; i++)
			x += (unsigned long)i * i;
	return x;
}

static const char script[] =
	"import time\n"
	"def embedded_hot(n):\n"
	"    s = 0\n"
	"    for i in range(n):\n"
	"        s += i * i\n"
	"    return s\n"
	"end = time.process_time() + %g\n"
	"while time.process_time() < end:\n"
	"    embedded_hot(2000)\n";

__attribute__((noinline)) static int python_phase(const char *lib, double secs)
{
	void (*init)(int);
	int (*run)(const char *);
	int (*fini)(void);
	char code[sizeof(script) + 32];
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		fprintf(stderr, "embedpy: %s\n", dlerror());
		return 2;
	}
	init = (void (*)(int))dlsym(h, "Py_InitializeEx");
	run = (int (*)(const char *))dlsym(h, "PyRun_SimpleString");
	fini = (int (*)(void))dlsym(h, "Py_FinalizeEx");
	if (!init || !run || !fini) {
		fprintf(stderr, "embedpy: %s has no Py_InitializeEx/PyRun_SimpleString\n", lib);
		return 2;
	}
	snprintf(code, sizeof(code), script, secs);
	init(0);
	if (run(code) != 0)
		return 3;
	return fini() == 0 ? 0 : 4;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: embedpy LIBPYTHON HOME SPIN PY\n");
		return 2;
	}
	setenv("PYTHONHOME", argv[2], 1);
	printf("spun %lu\n", native_spin(atof(argv[3])));
	fflush(stdout);
	return python_phase(argv[1], atof(argv[4]));
}
