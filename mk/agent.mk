# SPDX-License-Identifier: MIT
# libpyrsprof-agent.so, the LD_PRELOAD agent of --mode preload (src/agent/), built next to the
# pyrsprof binary, where `pyrsprof run` looks for it. It is loaded into any program, so it is
# built without sanitizers in every variant (an ASan runtime cannot be preloaded into a program
# that was not linked with it), position-independent, exporting only the functions it wraps. It carries
# its own copies of the CPython walker and the memory reader (the same sources).
AGENT_SRCS := src/agent/agent.c src/agent/chain.c src/agent/safecopy.c src/agent/selfreader.c \
	src/agent/sigmask.c src/agent/follow.c src/agent/fdguard.c src/python/walk.c
AGENT_OBJS := $(patsubst %.c,$(BUILD)/agent-pic/%.o,$(AGENT_SRCS))
AGENT := $(BUILD)/libpyrsprof-agent.so
AGENT_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -fno-sanitize=all $(WARN) -D_GNU_SOURCE \
	-Iinclude -Isrc

$(BUILD)/agent-pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(AGENT_CFLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

$(AGENT): $(AGENT_OBJS)
	$(call say,LD,$@)$(CC) -shared -Wl,-z,defs -Wl,-z,now -o $@ $^ -ldl -lpthread

bin/libpyrsprof-agent.so: $(AGENT)
	$(Q)mkdir -p bin && cp $< $@

all e2e bench: bin/libpyrsprof-agent.so

# A statically linked target: --mode preload must refuse it (tests/e2e/test_preload.py).
build/targets/static_hello: tests/targets/static_hello.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) -O2 -static -o $@ $<

# The agent's readers of its own process are unit-tested in the test binary
# (test_agent_selfreader.c, test_agent_safecopy.c).
UNIT_SRCS += src/agent/selfreader.c src/agent/safecopy.c src/agent/follow.c
