package e2e

import (
	"bytes"
	"compress/gzip"
	"strings"
)

// expect is what a TF Serving client must get: status, exact body bytes
// and Content-Type.
type expect struct {
	status int
	body   string
	// ctype is the Content-Type; "" means application/json (TF Serving's
	// only header), noCType means the header must be absent.
	ctype string
	// skip, when set, says why the case does not apply here.
	skip string
}

// noCType marks an answer without a Content-Type header.
const noCType = "<none>"

// tcase is one row of the shared table. Every case runs over both
// transports and against every kind of v2 server.
type tcase struct {
	name string
	req  request
	want expect
	// per overrides want for a kind ("kserve"), a transport ("proxy") or
	// both ("kserve/proxy"); the most specific entry wins.
	per map[string]expect
	// passThrough marks a request tfsbridge must not touch: the answer
	// must equal the v2 server's own answer to the same request, and
	// through Envoy the body phases must be switched off (mode_override
	// to NONE: the processor sees the request headers only).
	passThrough bool
}

// expectFor picks the expectation for kind and transport via.
func (c tcase) expectFor(kind, via string) expect {
	keys := []string{kind + "/" + via, via}
	if via == viaExtprocFD {
		// Full duplex answers as buffered Envoy does unless said otherwise.
		keys = append(keys, kind+"/"+viaExtproc, viaExtproc)
	}
	for _, k := range append(keys, kind) {
		if e, ok := c.per[k]; ok {
			return e
		}
	}
	return c.want
}

// ok is a 200 with a TF JSON body.
func ok(body string) expect { return expect{status: 200, body: body} }

// fail is a TF error answer.
func fail(status int, msg string) expect { return expect{status: status, body: tfError(msg)} }

// lines joins its arguments with newlines: multi-line TF bodies written
// one line per argument.
func lines(l ...string) string { return strings.Join(l, "\n") }

// column renders a rank-1 tensor written whole with single-line mode off
// (columnar format, docs/tfserving-rest.md §5.3): one element per line at depth+1, the
// closing bracket at depth. The opening bracket is the caller's.
func column(depth int, values ...string) string {
	in := strings.Repeat("    ", depth+1)
	return "[\n" + in + strings.Join(values, ",\n"+in) + "\n" + strings.Repeat("    ", depth) + "]"
}

// ints renders the integers from..to (inclusive) as JSON tokens.
func ints(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, itoa(i))
	}
	return out
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + itoa(i%10)
}

// gzipped compresses s, for Content-Encoding: gzip request bodies.
func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.String()
}

// The TF Serving README's example, byte for byte (docs/tfserving-rest.md §5.3).
const (
	readmeBody     = `{"instances": [1.0, 2.0, 5.0]}`
	readmeResponse = "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
)

// Headers the table uses.
const hdrRequestID = "X-Request-Id"

// status1 is the GET status body of a model with one ready version v
// (docs/tfserving-rest.md §2.1: protobuf JSON, 1-space indent, trailing newline).
func status1(v string) string {
	return lines(
		`{`,
		` "model_version_status": [`,
		`  {`,
		`   "version": "`+v+`",`,
		`   "state": "AVAILABLE",`,
		`   "status": {`,
		`    "error_code": "OK",`,
		`    "error_message": ""`,
		`   }`,
		`  }`,
		` ]`,
		`}`,
		``)
}

// modelSpec is the model_spec part of a metadata body; version "" is an
// unset version (KServe has none).
func modelSpec(name, version string) string {
	l := []string{`{`, `"model_spec":{`, ` "name": "` + name + `",`}
	if version != "" {
		l = append(l, ` "version": "`+version+`",`)
	}
	return lines(append(l, ` "signature_name": ""`, `}`, `,`, ``)...)
}

// halfPlusTwoMetadata is GET /v1/models/half_plus_two/metadata (docs/tfserving-rest.md
// §2.2: model_spec glued to the SignatureDefMap, tensor names "<name>:0",
// sizes as quoted int64s).
func halfPlusTwoMetadata(version string) string {
	return modelSpec("half_plus_two", version) + lines(
		`"metadata": {"signature_def": {`,
		` "signature_def": {`,
		`  "serving_default": {`,
		`   "inputs": {`,
		`    "x": {`,
		`     "name": "x:0",`,
		`     "dtype": "DT_FLOAT",`,
		`     "tensor_shape": {`,
		`      "dim": [`,
		`       {`,
		`        "size": "-1",`,
		`        "name": ""`,
		`       }`,
		`      ],`,
		`      "unknown_rank": false`,
		`     }`,
		`    }`,
		`   },`,
		`   "outputs": {`,
		`    "y": {`,
		`     "name": "y:0",`,
		`     "dtype": "DT_FLOAT",`,
		`     "tensor_shape": {`,
		`      "dim": [`,
		`       {`,
		`        "size": "-1",`,
		`        "name": ""`,
		`       }`,
		`      ],`,
		`      "unknown_rank": false`,
		`     }`,
		`    }`,
		`   },`,
		`   "method_name": "tensorflow/serving/predict",`,
		`   "defaults": {}`,
		`  }`,
		` }`,
		`}`,
		`}`,
		`}`,
		``)
}

// mixedTypesMetadata is the metadata of a batching model with three
// inputs and outputs of BOOL, INT64 and FP64, keyed in sorted order.
func mixedTypesMetadata(version string) string {
	info := func(name, dtype string, last bool) []string {
		end := "    },"
		if last {
			end = "    }"
		}
		return []string{
			`    "` + name + `": {`,
			`     "name": "` + name + `:0",`,
			`     "dtype": "` + dtype + `",`,
			`     "tensor_shape": {`,
			`      "dim": [`,
			`       {`,
			`        "size": "-1",`,
			`        "name": ""`,
			`       },`,
			`       {`,
			`        "size": "1",`,
			`        "name": ""`,
			`       }`,
			`      ],`,
			`      "unknown_rank": false`,
			`     }`,
			end,
		}
	}
	l := []string{`"metadata": {"signature_def": {`, ` "signature_def": {`, `  "serving_default": {`, `   "inputs": {`}
	l = append(l, info("count", "DT_INT64", false)...)
	l = append(l, info("flag", "DT_BOOL", false)...)
	l = append(l, info("value", "DT_DOUBLE", true)...)
	l = append(l, `   },`, `   "outputs": {`)
	l = append(l, info("count_plus_one", "DT_INT64", false)...)
	l = append(l, info("not_flag", "DT_BOOL", false)...)
	l = append(l, info("scaled", "DT_DOUBLE", true)...)
	l = append(l, `   },`, `   "method_name": "tensorflow/serving/predict",`, `   "defaults": {}`,
		`  }`, ` }`, `}`, `}`, `}`, ``)
	return modelSpec("mixed_types", version) + lines(l...)
}

// KServe has no model versions: every /versions/ path is its 501.
var kserveNoVersions = fail(501, "Model versioning not supported yet.")

// mlserverNoInfinity is what tfsbridge answers when a value cannot be
// carried to MLServer, whose JSON parser rejects non-finite numbers.
var mlserverNoInfinity = fail(400, "input 'x' holds an infinite value, which cannot be sent to the MLServer server: its JSON parser rejects non-finite numbers")

// simpleRow is one instance of Triton's "simple" model.
const simpleRow = `{"INPUT0": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15], "INPUT1": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}`

// predictCases are the TF Serving predict calls on every sample model.
var predictCases = []tcase{
	{
		name: "readme example",
		req:  request{path: "/v1/models/half_plus_two:predict", body: readmeBody},
		want: ok(readmeResponse),
	},
	{
		name: "readme example as curl sends it",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "*/*", "User-Agent": "curl/8.5.0"}},
		want: ok(readmeResponse),
	},
	{
		name: "row one instance",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [7.0]}`},
		want: ok("{\n    \"predictions\": [5.5\n    ]\n}"),
	},
	{
		name: "columnar plain list",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"inputs": [1.0, 2.0, 5.0]}`},
		want: ok("{\n    \"outputs\": " + column(1, "2.5", "3.0", "4.5") + "\n}"),
	},
	{
		name: "columnar named input",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"inputs": {"x": [1.0, 2.0]}}`},
		want: ok("{\n    \"outputs\": " + column(1, "2.5", "3.0") + "\n}"),
	},
	{
		name: "row named input objects",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [{"x": 1.0}, {"x": 3.0}]}`},
		want: ok("{\n    \"predictions\": [2.5, 3.5\n    ]\n}"),
	},
	{
		name: "signature_name serving_default",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"signature_name": "serving_default", "instances": [1.0]}`},
		want: ok("{\n    \"predictions\": [2.5\n    ]\n}"),
	},
	{
		name: "integers for a float input",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1, -4, 0]}`},
		want: ok("{\n    \"predictions\": [2.5, 0.0, 2.0\n    ]\n}"),
	},
	{
		name: "float formatting: 6 then 9 digits, exponents",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [0.1, 2000000.0, -4.00002, 1e-30]}`},
		// 0.5·0.1+2 is 2.04999995 in float32, which "2.05" gives back;
		// 1000002 needs 7 digits; 0.5·-4.00002+2 is -1.00135803e-05 in
		// float32 (9 digits); 1e-30 vanishes.
		want: ok("{\n    \"predictions\": [2.05, 1000002.0, -1.00135803e-05, 2.0\n    ]\n}"),
	},
	{
		name: "NaN and infinities in and out",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [NaN, Infinity, -Infinity, -NaN]}`},
		want: ok("{\n    \"predictions\": [NaN, Infinity, -Infinity, NaN\n    ]\n}"),
		per:  map[string]expect{mlserver: mlserverNoInfinity},
	},
	{
		name: "NaN alone",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"inputs": [NaN, 1.0]}`},
		want: ok("{\n    \"outputs\": " + column(1, "NaN", "2.5") + "\n}"),
	},
	{
		name: "trailing content after the document is ignored",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1.0]} trailing junk`},
		want: ok("{\n    \"predictions\": [2.5\n    ]\n}"),
	},
	{
		name: "gzip request body",
		req: request{path: "/v1/models/half_plus_two:predict", body: gzipped(readmeBody),
			header: map[string]string{"Content-Encoding": "gzip"}},
		want: ok(readmeResponse),
	},
	{
		name: "client accepting gzip still gets TF's plain JSON",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody,
			header: map[string]string{"Accept-Encoding": "gzip, deflate"}},
		want: ok(readmeResponse),
	},
	{
		name: "case-insensitive path",
		req:  request{path: "/V1/MODELS/half_plus_two:predict", body: readmeBody},
		want: ok(readmeResponse),
	},
	{
		name: "version path",
		req:  request{path: "/v1/models/half_plus_two/versions/1:predict", body: `{"instances": [1.0]}`},
		want: ok("{\n    \"predictions\": [2.5\n    ]\n}"),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "multi input, multi output, row objects",
		req:  request{path: "/v1/models/simple:predict", body: `{"instances": [` + simpleRow + `, ` + simpleRow + `]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "OUTPUT0": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],`,
			`            "OUTPUT1": [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]`,
			`        },`,
			`        {`,
			`            "OUTPUT0": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],`,
			`            "OUTPUT1": [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "multi input, multi output, columnar",
		req: request{path: "/v1/models/simple:predict",
			body: `{"inputs": {"INPUT1": [[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]], "INPUT0": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]], "ignored": 1}}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "OUTPUT0": [`,
			`            `+column(3, ints(1, 16)...),
			`        ],`,
			`        "OUTPUT1": [`,
			`            `+column(3, ints(-1, 14)...),
			`        ]`,
			`    }`,
			`}`)),
	},
	{
		name: "bytes: strings and b64 in, _bytes output as b64",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"instances": ["hello", {"b64": "d29ybGQ="}]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "echo": "hello",`,
			`            "echo_bytes": {`,
			`                "b64": "b2xsZWg="`,
			`            }`,
			`        },`,
			`        {`,
			`            "echo": "world",`,
			`            "echo_bytes": {`,
			`                "b64": "ZGxyb3c="`,
			`            }`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "bytes: columnar, escaping",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"inputs": ["a\"b\\c\n\u0001/é"]}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "echo": [`,
			`            "a\"b\\c\n\u0001/é"`,
			`        ],`,
			`        "echo_bytes": [`,
			`            {`,
			// The reversed bytes of "a\"b\\c\n\x01/\xc3\xa9".
			`                "b64": "qcMvAQpjXGIiYQ=="`,
			`            }`,
			`        ]`,
			`    }`,
			`}`)),
	},
	{
		name: "bytes: b64 padding forms abseil accepts",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"inputs": {"text": [{"b64": "aGk"}, {"b64": "aG k="}]}}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "echo": [`,
			`            "hi",`,
			`            "hi"`,
			`        ],`,
			`        "echo_bytes": [`,
			`            {`,
			`                "b64": "aWg="`,
			`            },`,
			`            {`,
			`                "b64": "aWg="`,
			`            }`,
			`        ]`,
			`    }`,
			`}`)),
	},
	{
		name: "FP16 model: JSON numbers in and out (DESIGN's departure)",
		req:  request{path: "/v1/models/half_times_two:predict", body: `{"instances": [[1.0, 2.5, -3.0, 0.1], [0.25, 1000, 65504, 1e-7]]}`},
		// 0.1 is 0.0999755859375 in FP16; 65504·2 overflows FP16 to +Inf;
		// 1e-7 is the subnormal 1.1920929e-07 in FP16.
		want: ok("{\n    \"predictions\": [[2.0, 5.0, -6.0, 0.199951172], [0.5, 2000.0, Infinity, 2.38418579e-07]\n    ]\n}"),
		// MLServer writes every non-finite float as null, read back as NaN:
		// the infinity is lost on that server.
		per: map[string]expect{mlserver: ok("{\n    \"predictions\": [[2.0, 5.0, -6.0, 0.199951172], [0.5, 2000.0, NaN, 2.38418579e-07]\n    ]\n}")},
	},
	{
		name: "negative zero keeps its sign",
		req:  request{path: "/v1/models/half_times_two:predict", body: `{"instances": [[-0.0, 0.0, -0, -1e-9]]}`},
		// -0 is the integer 0 for rapidjson (docs/tfserving-rest.md §3), so +0.0; -1e-9
		// underflows FP16 to -0.
		want: ok("{\n    \"predictions\": [[-0.0, 0.0, 0.0, -0.0]\n    ]\n}"),
	},
	{
		name: "FP16 model: NaN and infinities",
		req:  request{path: "/v1/models/half_times_two:predict", body: `{"inputs": [[NaN, Infinity, -Infinity, 1.0]]}`},
		want: ok("{\n    \"outputs\": [\n        " + column(2, "NaN", "Infinity", "-Infinity", "2.0") + "\n    ]\n}"),
		per:  map[string]expect{mlserver: mlserverNoInfinity},
	},
	{
		name: "FP16 outputs from FP32 inputs",
		req:  request{path: "/v1/models/FP16OutputModel:predict", body: `{"inputs": {"fp32_input": [[1.0, 0.1, 65504.0, 1e-8]]}}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "fp16_output": `+column(2, "1.0", "0.0999755859", "65504.0", "0.0")+`,`,
			`        "fp32_output": `+column(2, "1.0", "0.1", "65504.0", "1e-08"),
			`    }`,
			`}`)),
	},
	{
		name: "FP16 and BYTES inputs together",
		req: request{path: "/v1/models/FP16InputModel:predict",
			body: `{"instances": [{"fp16_input": [1.0, 2.0, 0.5, 3.0], "str_input": ["a", "b", "c", "d"]}]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "fp32_output": 1.0,`,
			`            "str_output": "a"`,
			`        },`,
			`        {`,
			`            "fp32_output": 2.0,`,
			`            "str_output": "b"`,
			`        },`,
			`        {`,
			`            "fp32_output": 0.5,`,
			`            "str_output": "c"`,
			`        },`,
			`        {`,
			`            "fp32_output": 3.0,`,
			`            "str_output": "d"`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "several outputs of mixed types, one _bytes",
		req:  request{path: "/v1/models/multi_out:predict", body: `{"instances": [[1.0, 2.0], [4.0, 3.0]]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "argmax": 1,`,
			`            "label_bytes": {`,
			`                "b64": "c2Vjb25k"`,
			`            },`,
			`            "sum": 3.0`,
			`        },`,
			`        {`,
			`            "argmax": 0,`,
			`            "label_bytes": {`,
			`                "b64": "Zmlyc3Q="`,
			`            },`,
			`            "sum": 7.0`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "several outputs, columnar",
		req:  request{path: "/v1/models/multi_out:predict", body: `{"inputs": [[1.0, 2.0], [4.0, 3.0]]}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "argmax": `+column(2, "1", "0")+`,`,
			`        "label_bytes": [`,
			`            {`,
			`                "b64": "c2Vjb25k"`,
			`            },`,
			`            {`,
			`                "b64": "Zmlyc3Q="`,
			`            }`,
			`        ],`,
			`        "sum": `+column(2, "3.0", "7.0"),
			`    }`,
			`}`)),
	},
	{
		name: "BOOL, INT64 and FP64",
		req: request{path: "/v1/models/mixed_types:predict",
			body: `{"instances": [{"flag": [true], "count": [3], "value": [0.1]}, {"value": [1.5], "flag": [false], "count": [9007199254740993]}]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "count_plus_one": [4],`,
			`            "not_flag": [false],`,
			`            "scaled": [0.30000000000000004]`,
			`        },`,
			`        {`,
			`            "count_plus_one": [9007199254740994],`,
			`            "not_flag": [true],`,
			`            "scaled": [13510798882111488.0]`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "INT64 exactness at the limits",
		req: request{path: "/v1/models/identity_int64:predict",
			body: `{"instances": [[9223372036854775807, -9223372036854775808, 9007199254740993, -0]]}`},
		want: ok("{\n    \"predictions\": [[9223372036854775807, -9223372036854775808, 9007199254740993, 0]\n    ]\n}"),
	},
	{
		name: "non-batching model, one instance (unbatched path)",
		req:  request{path: "/v1/models/fixed3:predict", body: `{"instances": [[1.0, 2.0, 3.5]]}`},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			`            "reversed": [3.5, 2.0, 1.0],`,
			`            "total": [6.5]`,
			`        }`,
			`    ]`,
			`}`)),
	},
	{
		name: "non-batching model, columnar as declared",
		req:  request{path: "/v1/models/fixed3:predict", body: `{"inputs": {"x": [1.0, 2.0, 3.5]}}`},
		want: ok(lines(
			`{`,
			`    "outputs": {`,
			`        "reversed": `+column(2, "3.5", "2.0", "1.0")+`,`,
			`        "total": `+column(2, "6.5"),
			`    }`,
			`}`)),
	},
}

// statusCases are GET status and metadata.
var statusCases = []tcase{
	{
		name: "status",
		req:  request{path: "/v1/models/half_plus_two"},
		want: ok(status1("1")),
		per:  map[string]expect{kserve: ok(status1("0"))},
	},
	{
		name: "status of a version",
		req:  request{path: "/v1/models/half_plus_two/versions/1"},
		want: ok(status1("1")),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "status ignores the label, as TF does",
		req:  request{path: "/v1/models/half_plus_two/labels/whatever"},
		want: ok(status1("1")),
		per:  map[string]expect{kserve: ok(status1("0"))},
	},
	{
		name: "status of an unknown version",
		req:  request{path: "/v1/models/half_plus_two/versions/2"},
		want: fail(404, "Could not find version 2 of model half_plus_two"),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "status of an unknown model",
		req:  request{path: "/v1/models/nope"},
		want: fail(404, "Could not find any versions of model nope"),
	},
	{
		name: "status: a query string is part of the model name",
		req:  request{path: "/v1/models/half_plus_two?x=1"},
		want: fail(404, "Could not find any versions of model half_plus_two?x=1"),
	},
	{
		name: "status: METADATA in capitals is a status request",
		req:  request{path: "/v1/models/half_plus_two/METADATA"},
		want: ok(status1("1")),
		per:  map[string]expect{kserve: ok(status1("0"))},
	},
	{
		name: "metadata",
		req:  request{path: "/v1/models/half_plus_two/metadata"},
		want: ok(halfPlusTwoMetadata("1")),
		per:  map[string]expect{kserve: ok(halfPlusTwoMetadata(""))},
	},
	{
		name: "metadata of a version",
		req:  request{path: "/v1/models/half_plus_two/versions/1/metadata"},
		want: ok(halfPlusTwoMetadata("1")),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "metadata: several inputs and outputs, sorted",
		req:  request{path: "/v1/models/mixed_types/metadata"},
		want: ok(mixedTypesMetadata("1")),
		per:  map[string]expect{kserve: ok(mixedTypesMetadata(""))},
	},
	{
		name: "metadata of an unknown model",
		req:  request{path: "/v1/models/nope/metadata"},
		want: fail(404, "Servable not found for request: Latest(nope)"),
	},
	{
		name: "metadata of an unknown version",
		req:  request{path: "/v1/models/half_plus_two/versions/7/metadata"},
		want: fail(404, "Servable not found for request: Specific(half_plus_two, 7)"),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "metadata by label",
		req:  request{path: "/v1/models/half_plus_two/labels/canary/metadata"},
		want: fail(400, "Unrecognized servable version label: canary"),
	},
}

// errorCases are TF Serving's error answers, texts and order.
var errorCases = []tcase{
	{
		name: "unknown model",
		req:  request{path: "/v1/models/nope:predict", body: `{"instances": [1.0]}`},
		want: fail(404, "Servable not found for request: Latest(nope)"),
	},
	{
		name: "unknown model version",
		req:  request{path: "/v1/models/half_plus_two/versions/50:predict", body: `{"instances": [1.0]}`},
		want: fail(404, "Servable not found for request: Specific(half_plus_two, 50)"),
		per:  map[string]expect{kserve: kserveNoVersions},
	},
	{
		name: "label on predict",
		req:  request{path: "/v1/models/half_plus_two/labels/stable:predict", body: `{"instances": [1.0]}`},
		want: fail(400, "Unrecognized servable version label: stable"),
	},
	{
		name: "JSON syntax error before unknown model",
		req:  request{path: "/v1/models/nope:predict", body: `{"instances": [1.0]`},
		want: fail(400, "JSON Parse error: Missing a comma or '}' after an object member. at offset: 19"),
	},
	{
		name: "JSON syntax error before unknown label",
		req:  request{path: "/v1/models/half_plus_two/labels/x:predict", body: `{"instances": [1.0,]}`},
		want: fail(400, "JSON Parse error: Invalid value. at offset: 19"),
	},
	{
		name: "empty body",
		req:  request{method: "POST", path: "/v1/models/half_plus_two:predict"},
		want: fail(400, "JSON Parse error: The document is empty"),
	},
	{
		name: "whitespace body",
		req:  request{path: "/v1/models/half_plus_two:predict", body: " \n "},
		want: fail(400, "JSON Parse error: The document is empty. at offset: 3"),
	},
	{
		name: "lower-case nan is not a token",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [nan]}`},
		want: fail(400, "JSON Parse error: Invalid value. at offset: 16"),
	},
	{
		name: "top level not an object",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `[1, 2]`},
		want: fail(400, "JSON Value: [1, 2] Is not object"),
	},
	{
		name: "neither instances nor inputs",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instance": [1.0]}`},
		want: fail(400, "Missing 'inputs' or 'instances' key"),
	},
	{
		name: "both instances and inputs",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1.0], "inputs": [1.0]}`},
		want: fail(400, "JSON Value: {\n    \"instances\": [1.0],\n    \"inputs\": [1.0]\n} Not formatted correctly expecting only one of 'inputs' or 'instances' keys to exist "),
	},
	{
		name: "empty instances",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": []}`},
		want: fail(400, "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array"),
	},
	{
		name: "signature_name not a string",
		req:  request{path: "/v1/models/nope:predict", body: `{"signature_name": 1, "instances": [1.0]}`},
		want: fail(400, "JSON Value: {\n    \"signature_name\": 1,\n    \"instances\": [1.0]\n} not formatted correctly. 'signature_name' key must be a string value."),
	},
	{
		name: "unknown signature",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"signature_name": "classify_x", "instances": [1.0]}`},
		want: fail(400, `Serving signature name: "classify_x" not found in signature def`),
	},
	{
		name: "dtype: string for a float, row",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [1.0, "a"]}`},
		want: fail(400, `Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: "a" Type: String is not of expected type: float`),
	},
	{
		name: "dtype: string for a float, columnar",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"inputs": ["x"]}`},
		want: fail(400, `JSON Value: "x" Type: String is not of expected type: float`),
	},
	{
		name: "dtype: decimal for an int32, named row",
		req:  request{path: "/v1/models/simple:predict", body: `{"instances": [{"INPUT0": [1.5], "INPUT1": [1]}]}`},
		want: fail(400, "Failed to process element: 0 key: INPUT0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1.5 Type: Number is not of expected type: int32"),
	},
	{
		name: "dtype: int32 out of range",
		req:  request{path: "/v1/models/simple:predict", body: `{"inputs": {"INPUT0": [[2147483648]], "INPUT1": [[1]]}}`},
		want: fail(400, "JSON Value: 2147483648 Type: Number is not of expected type: int32"),
	},
	{
		name: "dtype: int64 overflow",
		req:  request{path: "/v1/models/identity_int64:predict", body: `{"instances": [[9223372036854775808]]}`},
		want: fail(400, "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 9223372036854775808 Type: Number is not of expected type: int64"),
	},
	{
		name: "dtype: number for a bool",
		req:  request{path: "/v1/models/mixed_types:predict", body: `{"instances": [{"flag": [1], "count": [1], "value": [1.0]}]}`},
		want: fail(400, "Failed to process element: 0 key: flag of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1 Type: Number is not of expected type: bool"),
	},
	{
		name: "dtype: number for bytes",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"instances": [1]}`},
		want: fail(400, "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1 Type: Number is not of expected type: string"),
	},
	{
		name: "bad base64",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"inputs": [{"b64": "a-b_"}]}`},
		want: fail(400, "Unable to base64 decode"),
	},
	{
		name: "ragged instances",
		req:  request{path: "/v1/models/half_times_two:predict", body: `{"instances": [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0]]}`},
		want: fail(400, "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: Expecting tensor size: 4 but got: 2"),
	},
	{
		name: "ragged inside a columnar tensor",
		req:  request{path: "/v1/models/identity_int64:predict", body: `{"inputs": [[1, 2], [3]]}`},
		want: fail(400, "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
	},
	{
		name: "multiple inputs need objects, row",
		req:  request{path: "/v1/models/simple:predict", body: `{"instances": [[1, 2]]}`},
		want: fail(400, "instances is a plain list, but expecting list of objects as multiple input tensors required as per tensorinfo_map"),
	},
	{
		name: "multiple inputs need an object, columnar",
		req:  request{path: "/v1/models/simple:predict", body: `{"inputs": [[1, 2]]}`},
		want: fail(400, "inputs is a plain value/list, but expecting an object as multiple input tensors required as per tensorinfo_map"),
	},
	{
		name: "missing named input, columnar",
		req:  request{path: "/v1/models/simple:predict", body: `{"inputs": {"INPUT0": [[1]]}}`},
		want: fail(400, "Missing named input: INPUT1 in 'inputs' object."),
	},
	{
		name: "unknown named input, row",
		req:  request{path: "/v1/models/half_plus_two:predict", body: `{"instances": [{"y": 1.0}]}`},
		want: fail(400, "Failed to process element: 0 key: y of 'instances' list. Error: INVALID_ARGUMENT: JSON object: does not have named input: y"),
	},
	{
		name: "classify on a predict model",
		req:  request{path: "/v1/models/half_plus_two:classify", body: `{"examples": [{"x": 1.0}]}`},
		want: fail(400, "Expected classification signature method_name to be tensorflow/serving/classify. Was: tensorflow/serving/predict"),
	},
	{
		name: "regress on a predict model",
		req:  request{path: "/v1/models/half_plus_two:regress", body: `{"examples": [{"x": 1.0}]}`},
		want: fail(400, "Expected regression signature method_name to be tensorflow/serving/regress. Was: tensorflow/serving/predict"),
	},
	{
		name: "malformed: query string on predict",
		req:  request{path: "/v1/models/half_plus_two:predict?debug=1", body: readmeBody},
		want: fail(400, "Malformed request: POST /v1/models/half_plus_two:predict?debug=1"),
	},
	{
		name: "malformed: verb is case-sensitive",
		req:  request{path: "/v1/models/half_plus_two:PREDICT", body: readmeBody},
		want: fail(400, "Malformed request: POST /v1/models/half_plus_two:PREDICT"),
	},
	{
		name: "malformed: verb on a GET",
		req:  request{path: "/v1/models/half_plus_two:predict"},
		want: fail(400, "Malformed request: GET /v1/models/half_plus_two:predict"),
	},
	{
		name: "malformed: metadata on a POST",
		req:  request{path: "/v1/models/half_plus_two/metadata", body: readmeBody},
		want: fail(400, "Malformed request: POST /v1/models/half_plus_two/metadata"),
	},
	{
		name: "malformed: trailing slash",
		req:  request{path: "/v1/models/half_plus_two/"},
		want: fail(400, "Malformed request: GET /v1/models/half_plus_two/"),
	},
	{
		name: "malformed: version and label",
		req:  request{path: "/v1/models/half_plus_two/versions/1/labels/x:predict", body: readmeBody},
		want: fail(400, "Malformed request: POST /v1/models/half_plus_two/versions/1/labels/x:predict"),
	},
	{
		name: "malformed: PUT",
		req:  request{method: "PUT", path: "/v1/models/half_plus_two", body: readmeBody},
		want: fail(400, "Malformed request: PUT /v1/models/half_plus_two"),
	},
	{
		name: "version number overflow",
		req:  request{path: "/v1/models/half_plus_two/versions/18446744073709551615"},
		want: fail(400, "Failed to convert version: 18446744073709551615 to numeric."),
	},
	{
		name: "missing model name",
		req:  request{path: "/v1/models"},
		want: fail(400, "Missing model name in request."),
	},
	{
		name: "CORS preflight with an origin",
		req:  request{method: "OPTIONS", path: "/v1/models/half_plus_two:predict", header: map[string]string{"Origin": "https://example.com"}},
		want: expect{status: 200, ctype: noCType},
	},
	{
		name: "CORS preflight without an origin",
		req:  request{method: "OPTIONS", path: "/v1/models/half_plus_two:predict"},
		want: expect{status: 400, ctype: noCType},
	},
}

// backendErrorCases are v2 server 4xx answers turned into TF errors. The
// request id is fixed so that Triton's "[request id: ...]" prefix is
// known.
var backendErrorCases = []tcase{
	{
		name: "v2 400: batch over max_batch_size",
		req: request{path: "/v1/models/simple:predict", header: map[string]string{hdrRequestID: "e2e-batch"},
			body: `{"instances": [` + strings.Repeat(simpleRow+", ", 8) + simpleRow + `]}`},
		want: fail(400, "[request id: e2e-batch] inference request batch-size must be <= 8 for 'simple'"),
		// KServe and MLServer run the same model checks without Triton's
		// request-id prefix.
		per: map[string]expect{
			kserve:   fail(400, "inference request batch-size must be <= 8 for 'simple'"),
			mlserver: fail(400, "inference request batch-size must be <= 8 for 'simple'"),
		},
	},
	{
		name: "v2 400: shape the non-batching model does not take",
		req: request{path: "/v1/models/fixed3:predict", header: map[string]string{hdrRequestID: "e2e-shape"},
			body: `{"inputs": [1.0, 2.0]}`},
		want: fail(400, "[request id: e2e-shape] unexpected shape for input 'x' for model 'fixed3'. Expected [3], got [2]."),
		per: map[string]expect{
			kserve:   fail(400, "unexpected shape for input 'x' for model 'fixed3'. Expected [3], got [2]."),
			mlserver: fail(400, "unexpected shape for input 'x' for model 'fixed3'. Expected [3], got [2]."),
		},
	},
	{
		name: "invalid UTF-8 for a BYTES input",
		req:  request{path: "/v1/models/bytes_echo:predict", body: `{"instances": [{"b64": "/w=="}]}`},
		// Triton and MLServer carry any bytes; TF writes them verbatim.
		// KServe decodes BYTES as UTF-8: tfsbridge refuses up front.
		per: map[string]expect{kserve: fail(400, "input 'text' holds a string that is not valid UTF-8; the KServe server decodes BYTES tensors as UTF-8 text and cannot accept it")},
		want: ok(lines(
			`{`,
			`    "predictions": [`,
			`        {`,
			"            \"echo\": \"\xff\",",
			`            "echo_bytes": {`,
			`                "b64": "/w=="`,
			`            }`,
			`        }`,
			`    ]`,
			`}`)),
	},
}

// faultCases are v2 servers answering badly: malformed 200s from the
// mock's "garbage" model, and error answers the fault injector makes.
var faultCases = []tcase{
	{
		name: "garbage: truncated binary body",
		req:  request{path: "/v1/models/garbage:predict", body: `{"instances": [1.0]}`},
		want: fail(502, "invalid response from inference server: output 'y' announces 4 bytes of binary data but only 2 remain"),
		per: map[string]expect{
			mlserver: fail(502, "invalid response from inference server: malformed JSON: Missing a closing quotation mark in string. at offset: 96"),
		},
	},
	{
		name: "garbage: inference-header-content-length past the body",
		req:  request{path: "/v1/models/garbage:predict", body: `{"instances": [1.0]}`, header: map[string]string{"X-Mock-Garbage": "ihcl", hdrRequestID: "e2e-ihcl"}},
		// The mock claims 100 bytes more than its whole answer.
		want: fail(502, "invalid response from inference server: Inference-Header-Content-Length 255 exceeds the body length 155"),
		per: map[string]expect{
			kserve:   fail(502, "invalid response from inference server: Inference-Header-Content-Length 256 exceeds the body length 156"),
			mlserver: fail(502, "invalid response from inference server: Inference-Header-Content-Length 265 exceeds the body length 165"),
		},
	},
	{
		name: "garbage: invalid JSON",
		req:  request{path: "/v1/models/garbage:predict", body: `{"instances": [1.0]}`, header: map[string]string{"X-Mock-Garbage": "json"}},
		want: fail(502, "invalid response from inference server: malformed JSON: Invalid value. at offset: 43"),
	},
	{
		name: "garbage: empty 200",
		req:  request{path: "/v1/models/garbage:predict", body: `{"instances": [1.0]}`, header: map[string]string{"X-Mock-Garbage": "empty"}},
		want: fail(502, "invalid response from inference server: empty body"),
	},
	{
		name: "v2 500 with a JSON error",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "500", hdrFaultType: "application/json", hdrFaultBody: `{"error":"CUDA error: out of memory"}`}},
		want: fail(500, "CUDA error: out of memory"),
	},
	{
		name: "v2 503 in plain text",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "503", hdrFaultType: "text/plain; charset=utf-8", hdrFaultBody: "model half_plus_two is loading  "}},
		want: fail(503, "model half_plus_two is loading"),
	},
	{
		name: "v2 502 HTML page of a proxy",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "502", hdrFaultType: "text/html",
			hdrFaultBody: "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"}},
		want: fail(502, "502 Bad Gateway 502 Bad Gateway nginx"),
	},
	{
		name: "v2 422 FastAPI validation list",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "422", hdrFaultType: "application/json",
			hdrFaultBody: `{"detail":[{"loc":["body","inputs",0,"datatype"],"msg":"Input should be 'BOOL', 'UINT8' or 'FP32'","type":"enum"}]}`}},
		want: fail(400, "body.inputs.0.datatype: Input should be 'BOOL', 'UINT8' or 'FP32'"),
	},
	{
		name: "v2 429 with an empty body",
		req:  request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{hdrFaultStatus: "429"}},
		want: fail(429, "Too Many Requests"),
	},
	{
		name: "v2 404: the model went away after its metadata was read",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "404", hdrFaultType: "application/json", hdrFaultBody: `{"error":"Request for unknown model: 'half_plus_two' is not found"}`}},
		want: fail(404, "Servable not found for request: Latest(half_plus_two)"),
	},
	{
		name: "v2 201 success is still TF's 200",
		req: request{path: "/v1/models/half_plus_two:predict", body: readmeBody, header: map[string]string{
			hdrFaultStatus: "201", hdrFaultType: "application/json",
			hdrFaultBody: `{"model_name":"half_plus_two","outputs":[{"name":"y","datatype":"FP32","shape":[3],"data":[2.5,3.0,4.5]}]}`}},
		want: ok(readmeResponse),
	},
}

// passThroughCases are requests that are not TF Serving REST calls: the
// v2 inference API passes through, the rest is refused.
var passThroughCases = []tcase{
	{
		name: "native v2 infer",
		req: request{path: "/v2/models/simple/infer", header: map[string]string{"Content-Type": "application/json"},
			body: `{"id":"e2e-native","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},` +
				`{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`},
		passThrough: true,
	},
	{
		name:        "native v2 model metadata",
		req:         request{path: "/v2/models/half_plus_two"},
		passThrough: true,
	},
	{
		name:        "native v2 readiness",
		req:         request{path: "/v2/health/ready"},
		passThrough: true,
	},
	// Neither TF Serving REST calls nor v2 inference calls: under the
	// default --passthrough inference they never reach the v2 server.
	{
		name: "a path outside /v1 and the v2 inference API",
		req:  request{path: "/v1beta/models/half_plus_two:predict", body: readmeBody},
		want: fail(404, "Not found: POST /v1beta/models/half_plus_two:predict is not a TF Serving REST call or a v2 inference call"),
	},
	{
		name: "Triton's model control is refused",
		req:  request{path: "/v2/repository/models/half_plus_two/unload", body: "{}"},
		want: fail(404, "Not found: POST /v2/repository/models/half_plus_two/unload is not a TF Serving REST call or a v2 inference call"),
	},
	{
		name: "a dot segment cannot reach another v2 path",
		req:  request{method: "GET", path: "/v2/models/../repository/index"},
		want: fail(404, "Not found: GET /v2/models/../repository/index is not a TF Serving REST call or a v2 inference call"),
	},
	{
		name:        "a v2 error is not rewritten",
		req:         request{path: "/v2/models/nope/infer", body: `{"inputs": []}`, header: map[string]string{"Content-Type": "application/json"}},
		passThrough: true,
	},
}

// tableCases is the whole shared table.
func tableCases() []tcase {
	var all []tcase
	for _, group := range [][]tcase{predictCases, examplesCases, statusCases, errorCases, backendErrorCases, faultCases, passThroughCases} {
		all = append(all, group...)
	}
	return all
}
