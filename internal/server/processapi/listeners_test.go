package processapi

// The transports the service is served on: gRPC and REST over unix
// sockets, and reflection.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"
)

func TestRESTOverUnixSockets(t *testing.T) {
	dir := t.TempDir()
	srv, client := startServer(t, Config{
		GRPCAddr: "unix:" + filepath.Join(dir, "grpc.sock"),
		RESTAddr: "unix:" + filepath.Join(dir, "rest.sock"),
	})
	if srv.RESTAddr() != "unix:"+filepath.Join(dir, "rest.sock") {
		t.Fatalf("RESTAddr = %q", srv.RESTAddr())
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "rest.sock"))
	}}}
	do := func(method, path string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://sandboxd"+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, body := do("GET", "/v1/health", nil); code != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("health = %d %s", code, body)
	}
	if code, _ := do("PUT", "/v1/files/a/b.txt", []byte("hello")); code != http.StatusNoContent {
		t.Fatalf("put = %d", code)
	}
	// A file written over REST is visible to a command over gRPC.
	res, err := client.Execute(context.Background(), &processv1.ExecuteRequest{Config: sh("cat a/b.txt")})
	if err != nil || string(res.Stdout) != "hello" {
		t.Fatalf("execute cat = %v, %v", res, err)
	}
	if code, body := do("GET", "/v1/files/a/b.txt", nil); code != 200 || string(body) != "hello" {
		t.Fatalf("get = %d %q", code, body)
	}
	if code, _ := do("GET", "/v1/files/..%2F..%2Fetc%2Fpasswd", nil); code != http.StatusForbidden {
		t.Fatalf("escape = %d, want 403", code)
	}
	if code, _ := do("DELETE", "/v1/files/a/b.txt", nil); code != http.StatusNoContent {
		t.Fatalf("delete = %d", code)
	}
	if code, _ := do("HEAD", "/v1/files/a/b.txt", nil); code != http.StatusNotFound {
		t.Fatalf("head after delete = %d, want 404", code)
	}
}

func TestStartReleasesGRPCListenerWhenRESTFails(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(t.TempDir(), "grpc.sock")
	_, err = Start(context.Background(), Config{RootDir: t.TempDir(), GRPCAddr: "unix:" + sock, RESTAddr: busy.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "rest") {
		t.Fatalf("err = %v, want a rest listen error", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("gRPC socket left behind: %v", err)
	}
}

func TestGRPCReflectionListsProcessService(t *testing.T) {
	srv, _ := startServer(t, Config{})
	conn, err := dial(srv.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "process.v1.ProcessService") {
		t.Fatalf("services = %v, want process.v1.ProcessService", names)
	}
}

// dial connects to a ProcessService at addr ("host:port" or
// "unix:/path") in plain text, as the host-side client does.
func dial(addr string) (*grpc.ClientConn, error) {
	target := addr
	if !strings.HasPrefix(addr, "unix:") {
		target = "passthrough:///" + addr
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
