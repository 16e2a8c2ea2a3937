# Run at build time (cmake -P): writes the git commit of the source tree into
# OUT, touching it only when it changed so nothing rebuilds needlessly.
# Inputs: SRC (source dir), OUT (file to write), TEMPLATE (file with @DLB_GIT_COMMIT@).
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  # Tracked files modified since the commit: the binary is not that commit.
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    string(APPEND commit "-dirty")
  endif()
endif()
set(DLB_GIT_COMMIT "${commit}")
configure_file("${TEMPLATE}" "${OUT}.tmp" @ONLY)
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
