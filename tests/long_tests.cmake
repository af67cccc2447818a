# The tests that take longest, each with its cost (seconds on a busy 2-core machine, rounded):
# ctest -j starts tests in descending order of cost, and a fresh build folder has no measured
# costs (Testing/Temporary/CTestCostData.txt) yet, so without these the longest tests, declared
# last, would start last and run alone at the end while the other core idles. Only the order
# depends on these numbers; a later run in the same folder uses what it measured.
set(QD_LONG_TESTS
  html_report_in_browser 300
  SavedReport.MutatedReportsNeverCrashTheViewsOrCheck 160
  StoreMutation.EveryByteFlippedGivesAnErrorOrTheSameContent 140
  html_report_pages 130
  HtmlPage.LargeReportsKeepEveryRowAndTheFiguresOfFailingGroupsFirst 120
  JsonReport.ALongReportKeepsElementListsOnlyWhereTheyAreRead 60
  html_report_in_browser_5000_runs 60
  html_report_in_browser_100k 60
  Demo.EveryFaultKindIsTheFirstDivergenceAndACleanRunPasses 40
  python_llm_example 30
  python_package 30
  CaptureApi.OutOfMemoryInThePipelineThreadsIsAStatusNeverACrash 25
  FlushEvery/CrashTest.KillAtVariousPointsKeepsEveryDurableTensor/1 25
  FlushEvery/CrashTest.KillAtVariousPointsKeepsEveryDurableTensor/7 25
  CrashTest.KillDuringOpenLeavesNothingOrAStoreThatOpens 25
  Cli.DamagedStoresGiveOneLineOnStderr 25
  Hints.TheSuggestedOverrideGivesThePromisedSqnr 25
  install_deb_packages_run_demo 20
  report_page_bench_smoke 20)

# qd_start_long_tests_first(): at the end of a tests folder's CMakeLists.txt, gives the listed
# tests of that folder their cost. Tests declared with add_test get it now; tests gtest
# discovers at build time get it from a ctest script run after the discovery's, in which the
# names of other folders' tests are ignored.
function(qd_start_long_tests_first)
  set(script "${CMAKE_CURRENT_BINARY_DIR}/long_test_costs.cmake")
  set(lines "")
  set(names ${QD_LONG_TESTS})
  while(names)
    list(POP_FRONT names name cost)
    if(TEST "${name}")
      set_tests_properties("${name}" PROPERTIES COST ${cost})
    else()
      string(APPEND lines "set_tests_properties([=[${name}]=] PROPERTIES COST ${cost})\n")
    endif()
  endwhile()
  file(WRITE "${script}" "${lines}")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
endfunction()
