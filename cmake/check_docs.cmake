# Checks that the documentation points at files that exist: every relative
# markdown link [text](target) of the tree's markdown files resolves to a
# file or folder (and a #anchor into a markdown file to one of its headings),
# and every repository path written in README.md, docs/ and data/README.md
# (e.g. `bench/e2e/run.sh`, `ir/tmpl_*.c`, or net/executor for its .c)
# names something that is there.
# ctest runs it as test_docs.
#   cmake -DSOURCE_DIR=<repository> -P cmake/check_docs.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repository> -P check_docs.cmake")
endif()

# Top-level folders whose paths the documentation names.
set(roots base conv ir device opencl cuda records net graph_enc gnn tuner cli worker
    bench docs data tests fuzz examples scripts cmake include)
list(JOIN roots "|" roots_re)

file(GLOB_RECURSE md_files LIST_DIRECTORIES false RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/*.md)
list(FILTER md_files EXCLUDE REGEX "^(build[^/]*|fuzz/out|\\.git|\\.gpu)/")
set(errors "")
set(checked 0)

# The GitHub anchor of a heading: lower case, punctuation dropped, spaces to hyphens.
function(heading_anchors file out)
  file(STRINGS ${file} heads REGEX "^#+ ")
  set(anchors "")
  foreach(h IN LISTS heads)
    string(REGEX REPLACE "^#+ +" "" h "${h}")
    string(TOLOWER "${h}" h)
    string(REGEX REPLACE "[^a-z0-9 _-]" "" h "${h}")
    string(REPLACE " " "-" h "${h}")
    list(APPEND anchors "${h}")
  endforeach()
  set(${out} "${anchors}" PARENT_SCOPE)
endfunction()

foreach(md IN LISTS md_files)
  file(READ ${SOURCE_DIR}/${md} text)
  # CMake lists split on ';' and do not split inside [...]: take those out.
  string(REPLACE ";" " " text "${text}")
  string(REPLACE "[" "<" text "${text}")
  string(REPLACE "]" ">" text "${text}")
  get_filename_component(dir ${SOURCE_DIR}/${md} DIRECTORY)
  # Links: ](target) with no scheme.
  string(REGEX MATCHALL ">\\([^) ]+\\)" links "${text}")
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^>\\((.*)\\)$" "\\1" target "${link}")
    if(target MATCHES "^[a-z]+:")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    set(anchor "")
    if(target MATCHES "#")
      string(REGEX REPLACE "^[^#]*#" "" anchor "${target}")
      string(REGEX REPLACE "#.*$" "" target "${target}")
    endif()
    if(target STREQUAL "")
      set(path ${SOURCE_DIR}/${md})
    else()
      set(path ${dir}/${target})
    endif()
    if(NOT EXISTS ${path})
      string(APPEND errors "  ${md}: link to ${target}: no such file\n")
    elseif(anchor AND path MATCHES "\\.md$")
      heading_anchors(${path} anchors)
      if(NOT anchor IN_LIST anchors)
        string(APPEND errors "  ${md}: link to ${target}#${anchor}: no such heading\n")
      endif()
    endif()
  endforeach()

  # Repository paths in prose and code (README, docs, data): relative to the root.
  if(md MATCHES "^(README\\.md|docs/|data/README\\.md)")
    string(REGEX MATCHALL "(^|[ `(=|\n])(${roots_re})/[A-Za-z0-9_./*-]*" words "${text}")
    foreach(w IN LISTS words)
      string(REGEX REPLACE "^[ `(=|\n]" "" w "${w}")
      string(REGEX REPLACE "[.]+$" "" w "${w}")
      math(EXPR checked "${checked} + 1")
      if(w MATCHES "\\*")
        file(GLOB hits ${SOURCE_DIR}/${w})
        if(NOT hits)
          string(APPEND errors "  ${md}: ${w}: matches nothing\n")
        endif()
      elseif(NOT EXISTS ${SOURCE_DIR}/${w})
        # A file named without its extension (net/executor: net/executor.c) counts.
        file(GLOB hits ${SOURCE_DIR}/${w}.*)
        if(NOT hits)
          string(APPEND errors "  ${md}: ${w}: no such file\n")
        endif()
      endif()
    endforeach()
  endif()
endforeach()

list(LENGTH md_files nfiles)
if(errors)
  message(FATAL_ERROR "documentation points at missing files:\n${errors}")
endif()
message(STATUS "check_docs: ${checked} links and paths in ${nfiles} markdown files, all present")
