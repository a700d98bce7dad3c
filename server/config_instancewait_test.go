package server

import (
	"strings"
	"testing"
	"time"
)

// TestConfigInstanceWait: [server] instance_wait sets how long a call
// waits for a connector instance (absent: 0, the executor's default), and
// anything but a positive duration is refused at its line.
func TestConfigInstanceWait(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	c, err := ParseConfig("connhost.toml", []byte("[server]\ninstance_wait = \"750ms\"\n"), env)
	if err != nil || c.Server.InstanceWait != 750*time.Millisecond {
		t.Fatalf("instance_wait 750ms: %+v %v", c, err)
	}
	c, err = ParseConfig("connhost.toml", []byte("[server]\n"), env)
	if err != nil || c.Server.InstanceWait != 0 {
		t.Fatalf("no instance_wait: %v %v", c.Server.InstanceWait, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"soon"`, `5`} {
		_, err := ParseConfig("connhost.toml", []byte("[server]\ninstance_wait = "+bad+"\n"), env)
		if err == nil || !strings.Contains(err.Error(), "connhost.toml:2:") || !strings.Contains(err.Error(), "instance_wait must be a positive duration") {
			t.Errorf("instance_wait = %s: %v", bad, err)
		}
	}
}
