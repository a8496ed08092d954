// Package tfcompare compares two TensorFlow Serving REST answers to the
// same request, in TF terms: for predict (`predictions` or `outputs`),
// classify and regress (`results`) every output's name, shape and JSON
// dtype, the largest absolute and relative error, NaN/Inf positions, and
// for classify the top-1 label agreement and score error; an `{"error"}`
// answer is compared with the other by HTTP status.
//
// It is pure (no I/O) and allocation-light: a Comparer keeps its buffers
// and its Result between calls, so the offline runner (internal/comparerun)
// and a future shadow mode can call it per exchange. Error distributions
// are fixed-size log-scale histograms that merge, not slices that grow.
package tfcompare
