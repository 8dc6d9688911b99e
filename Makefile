# Thin wrapper over CMake. Every entry point installs dependencies first. Without make, ./dev TARGET
# installs them (make included) and then runs make TARGET.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps configure build test fuzz-smoke demo bench fresh-check format clean install deb

all: build

deps:
	@./scripts/deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 300

# The libFuzzer targets (tests/fuzz) with clang and the sanitizers, 30 s each from the kept corpus.
# A separate build directory; CI runs it after test.
fuzz-smoke: deps
	@./scripts/fuzz_smoke.sh

# PREFIX (default /usr/local) and DESTDIR as usual: fay, its runtime library, man pages, bash and
# zsh completion, the agent's systemd unit.
PREFIX ?= /usr/local
install: build
	@DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# A Debian package (CPack) in $(BUILD): fay_VERSION_amd64.deb, its dependencies found by
# dpkg-shlibdeps.
deb: build
	@cd $(BUILD) && cpack -G DEB >/dev/null && ls -1 $(CURDIR)/$(BUILD)/fay_*.deb

demo: build
	$(BUILD)/fay query 'syscall:* | count() as calls by comm | top 15 | for 5s'

bench: build
	bench/run

# Opt-in, not part of test: the README's two commands on a minimal Debian 12 made by debootstrap,
# in a chroot, from a clone of the committed HEAD. Root. KEEP=1 keeps the root; FRESH_FLAGS takes
# the script's other options (scripts/fresh_check.sh --help).
fresh-check:
	@./scripts/fresh_check.sh $(if $(KEEP),--keep) $(FRESH_FLAGS)

format:
	clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h')

clean:
	rm -rf $(BUILD)
