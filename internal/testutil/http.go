package testutil

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// AdminCall makes a request to the admin API as its writes want it: the
// bearer token and a JSON body. It returns the status and the body, and
// fails the test only if no answer comes.
func AdminCall(t testing.TB, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
