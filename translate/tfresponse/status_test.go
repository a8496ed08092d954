package tfresponse

import "testing"

func TestStatus(t *testing.T) {
	cases := []struct {
		name     string
		versions []VersionStatus
		want     string
	}{
		{"none", nil, "{\n \"model_version_status\": []\n}\n"},
		{"two versions in the given order, defaults for empty enums", []VersionStatus{
			{Version: "7", State: "AVAILABLE", ErrorCode: "OK"},
			{Version: "3", State: "END", ErrorCode: "NOT_FOUND", ErrorMessage: "gone <\"x\">"},
			{},
		}, `{
 "model_version_status": [
  {
   "version": "7",
   "state": "AVAILABLE",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  },
  {
   "version": "3",
   "state": "END",
   "status": {
    "error_code": "NOT_FOUND",
    "error_message": "gone \u003c\"x\"\u003e"
   }
  },
  {
   "version": "0",
   "state": "UNKNOWN",
   "status": {
    "error_code": "OK",
    "error_message": ""
   }
  }
 ]
}
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(Status([]byte("> "), c.versions)); got != "> "+c.want {
				t.Errorf("Status:\n got %q\nwant %q", got, "> "+c.want)
			}
		})
	}
}
