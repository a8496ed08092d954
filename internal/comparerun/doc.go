// Package comparerun is "tfsbridge compare" without the command line:
// it reads or generates TF Serving REST requests, replays each against
// two endpoints that speak TF REST (a TF Serving, or a v2 server behind
// an in-process tfsbridge), compares the answers with translate/tfcompare
// and aggregates them per model and output into a Report, printed as a
// table or written as a self-contained HTML page.
package comparerun
