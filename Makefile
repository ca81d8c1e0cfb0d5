# dpsynth: `make book` (the main job) and `make test` each set themselves up from nothing:
# a virtual environment from requirements.txt, the Stan programs compiled (PyStan caches
# them in ~/.cache/httpstan), and for the browser check Debian's chromium.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PROFILE ?= paper
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9]*.ipynb))
EXECUTED := $(patsubst notebooks/%.ipynb,book/executed/%.ipynb,$(NOTEBOOKS))
LIBRARY := $(wildcard dpsynth/*.py dpsynth/*/*.py) $(wildcard dpsynth/stan/*.stan)
PROFILE_STAMP := book/executed/.profile-$(PROFILE)

.PHONY: venv compile test lint pytest nbval book book-html book-check book-pdf browser mathjax clean

$(STAMP): requirements.txt pyproject.toml
	@echo "[make] creating $(VENV) and installing the pinned requirements.txt (pip is quiet;" \
	  "usually 2-4 min on a 2-core machine)" >&2
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VENV) && \
	$(BIN)/python -m pip install -q --upgrade pip && \
	$(BIN)/python -m pip install -q -r requirements.txt && \
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e . && \
	echo "[make] $(VENV) ready in $$(( $$(date +%s) - start )) s" >&2
	touch $@

# The notebooks' kernel. Its own log (on the terminal of `make book`) is limited to critical
# messages: ipykernel otherwise warns on every start that papermill's local kernel talks over
# TCP, and logs "KeyboardInterrupt caught in kernel" when papermill interrupts it on shutdown
# (both harmless; cell errors still fail papermill).
KERNEL_STAMP := $(VENV)/.kernel-stamp
$(KERNEL_STAMP): $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (dpsynth)" >/dev/null
	$(BIN)/python -c 'import json, sys; p = sys.argv[1]; k = json.load(open(p)); \
	  k["argv"] += ["--IPKernelApp.log_level=CRITICAL"]; json.dump(k, open(p, "w"), indent=1)' \
	  $(VENV)/share/jupyter/kernels/python3/kernel.json
	touch $@

venv: $(STAMP) $(KERNEL_STAMP)

# Compile the shipped Stan programs once, two at a time (no two processes build the same one).
compile: venv
	@echo "[make] compiling the shipped Stan programs if not cached in ~/.cache/httpstan (once:" \
	  "about a minute per program on a quiet machine, several under load; a line every 30 s)" >&2
	@start=$$(date +%s); \
	$(BIN)/python -c "from dpsynth.models.catalogue import compile_all; compile_all()" && \
	echo "[make] Stan programs ready in $$(( $$(date +%s) - start )) s" >&2

lint: venv
	$(BIN)/ruff check dpsynth tests benchmarks data tools book/_ext $(NOTEBOOKS)
	$(BIN)/ruff format --check dpsynth tests benchmarks data tools book/_ext

pytest: compile
	$(BIN)/python -m pytest -q -rs -n 2 --dist loadfile -p no:cacheprovider \
	  --ignore=tests/test_notebook_outputs.py tests

# nbval without a second execution: the cells marked NBVAL_CHECK_OUTPUT in the notebooks the
# ci book build executed (book/executed/, stamp .profile-ci) against their committed outputs.
nbval: venv
	NBVAL_REQUIRE_EXECUTED=1 $(BIN)/python -m pytest -q -rs -p no:cacheprovider \
	  tests/test_notebook_outputs.py

# ---- the book --------------------------------------------------------------------
# Each notebook is executed by papermill with `-p profile $(PROFILE)` into book/executed/;
# it reruns only when the notebook, the library or the profile changed. Monte Carlo
# replicates are cached on disk by dpsynth.studies.runner, so a rerun recomputes only what changed.
$(PROFILE_STAMP): | venv
	mkdir -p book/executed
	rm -f book/executed/.profile-*
	touch $@

# Monte Carlo studies append "done/total, time left" lines to book/executed/NN.progress
# (dpsynth.studies.runner); tail prints them here while the kernel runs.
book/executed/%.ipynb: notebooks/%.ipynb $(LIBRARY) tools/prepare_executed.py $(PROFILE_STAMP) | compile
	@echo "[make] executing $< with profile $(PROFILE)" >&2
	@start=$$(date +%s); part=book/executed/$*.part.ipynb; log=book/executed/$*.progress; \
	: > $$log; tail -n +1 -F -s 1 $$log >&2 2>/dev/null & tailpid=$$!; \
	DPSYNTH_PROGRESS_LOG=$(CURDIR)/$$log DPSYNTH_PROGRESS_LABEL=$* \
	$(BIN)/papermill $< $$part -p profile $(PROFILE) --cwd notebooks -k python3 --log-level ERROR \
	  --progress-bar && $(BIN)/python tools/prepare_executed.py $$part --profile $(PROFILE) && \
	  mv $$part $@; status=$$?; sleep 1; kill $$tailpid; rm -f $$log; \
	[ $$status -eq 0 ] || { $(BIN)/python tools/explain_failure.py $$part $* $(PROFILE); \
	  exit $$status; }; \
	echo "[make] $* took $$(( $$(date +%s) - start )) s" | tee -a book/executed/timings.log >&2

book-html: $(EXECUTED) | mathjax
	$(BIN)/jupyter-book build . -W -n --keep-going

book: book-html

# MathJax 2 from Debian (libjs-mathjax), served from the build: the book loads nothing
# from a CDN. The files TeX-AMS_CHTML needs (~2 MB) are copied into _build/mathjax (not
# in git), which _config.yml lists in html_static_path -> _build/html/_static/mathjax.
MATHJAX_SRC := /usr/share/javascript/mathjax
MATHJAX_DIR := _build/mathjax/mathjax
MATHJAX_FILES := MathJax.js config/TeX-AMS_CHTML.js extensions jax/input/TeX jax/element \
	jax/output/CommonHTML fonts/HTML-CSS/TeX/woff fonts/HTML-CSS/TeX/otf

mathjax: $(MATHJAX_DIR)/MathJax.js

$(MATHJAX_DIR)/MathJax.js:
	@test -f $(MATHJAX_SRC)/MathJax.js || { \
	  echo "[make] installing Debian's libjs-mathjax (once; under a minute)" >&2; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjs-mathjax >/dev/null; }
	rm -rf $(MATHJAX_DIR).part && mkdir -p $(MATHJAX_DIR).part
	cd $(MATHJAX_SRC) && cp -rL --parents $(MATHJAX_FILES) $(CURDIR)/$(MATHJAX_DIR).part/
	rm -rf $(MATHJAX_DIR) && mv $(MATHJAX_DIR).part $(MATHJAX_DIR)

# Debian's chromium for the headless-browser check of the built HTML.
browser:
	@command -v chromium >/dev/null || { \
	  echo "[make] installing Debian's chromium for the browser check (once; 1-3 min)" >&2; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

book-check: browser
	$(BIN)/python tools/check_book.py _build/html

# The whole book, print-friendly: every page of _toc.yml (its root and every `file:` entry,
# the executed notebooks under book/executed/ included), as built, printed to
# _build/pdf/NN_<page>.pdf in reading order by headless chromium with the theme's print
# stylesheet (after `make book` or book-html), then merged into _build/pdf/dpsynth_book.pdf
# with one bookmark per page (tools/merge_pdf.py).
TOC_PAGES = $(shell sed -n -E 's/^[[:space:]]*(-[[:space:]]*)?(root|file):[[:space:]]*([^[:space:]#]+).*/\3/p' _toc.yml)
book-pdf: browser
	@test -f _build/html/book/dp_primer.html || { echo "book-pdf: build the book first" >&2; exit 2; }
	@rm -rf _build/pdf && mkdir -p _build/pdf
	@i=0; for page in $(TOC_PAGES); do \
	  i=$$((i + 1)); html=_build/html/$$page.html; \
	  test -f $$html || { echo "book-pdf: $$html was not built" >&2; exit 1; }; \
	  out=_build/pdf/$$(printf '%02d' $$i)_$$(basename $$page).pdf; \
	  chromium --headless --no-sandbox --disable-gpu --no-pdf-header-footer \
	    --virtual-time-budget=20000 --print-to-pdf=$$out \
	    file://$(CURDIR)/$$html 2>/dev/null || exit 1; \
	  echo "[make] $$out" >&2; \
	done
	$(BIN)/python tools/merge_pdf.py _build/pdf/dpsynth_book.pdf $$(ls _build/pdf/[0-9][0-9]_*.pdf)

# The test command: lint (library and notebooks), unit and Stan tests, the book under the ci
# profile (each notebook executed once), nbval on those executed notebooks, and the built
# HTML opened in headless chromium (installed first: a unit test runs the check's probe in it).
# The ci notebooks run two at a time (-j2: on 2 cores,
# 91 s instead of 168 s, measured); the paper-scale `make book` runs them one by one, since
# its studies use both cores themselves.
test: lint browser pytest
	$(MAKE) -j2 book-html PROFILE=ci
	$(MAKE) nbval
	$(MAKE) book-check

clean:
	rm -rf _build book/executed .pytest_cache
