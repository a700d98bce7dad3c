package e2e

import (
	"net"
	"net/textproto"
	"strings"
	"sync"
)

// smtpSink is the downstream SMTP server the real Mailpit relays released
// messages to (its --smtp-relay-config points here). It accepts every
// message and records the envelope recipients, so a test counts releases
// where they land, not from the connector's answer. It speaks just enough
// SMTP for net/smtp's client: EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT.
type smtpSink struct {
	l  net.Listener
	wg sync.WaitGroup

	mu   sync.Mutex
	msgs []sunkMessage
}

// sunkMessage is one message the sink accepted.
type sunkMessage struct {
	To   []string
	Data string
}

func startSMTPSink() (*smtpSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &smtpSink{l: l}
	s.wg.Go(s.serve)
	return s, nil
}

func (s *smtpSink) port() int { return s.l.Addr().(*net.TCPAddr).Port }

func (s *smtpSink) close() {
	_ = s.l.Close()
	s.wg.Wait()
}

// messages returns a copy of what the sink accepted so far.
func (s *smtpSink) messages() []sunkMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sunkMessage(nil), s.msgs...)
}

func (s *smtpSink) serve() {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() { s.session(conn) })
	}
}

func (s *smtpSink) session(conn net.Conn) {
	defer conn.Close()
	tp := textproto.NewConn(conn)
	reply := func(line string) bool { return tp.PrintfLine("%s", line) == nil }
	if !reply("220 sink.connhost.test ESMTP e2e sink") {
		return
	}
	var to []string
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.Fields(line + " x")[0])
		switch verb {
		case "EHLO":
			_ = tp.PrintfLine("250-sink.connhost.test")
			reply("250 8BITMIME")
		case "HELO", "NOOP":
			reply("250 OK")
		case "MAIL":
			to = nil
			reply("250 OK")
		case "RSET":
			to = nil
			reply("250 OK")
		case "RCPT":
			addr := line[strings.IndexByte(line, ':')+1:]
			addr = strings.Trim(strings.Fields(addr + " ")[0], "<>")
			to = append(to, addr)
			reply("250 OK")
		case "DATA":
			if !reply("354 end with <CRLF>.<CRLF>") {
				return
			}
			b, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, sunkMessage{To: to, Data: string(b)})
			s.mu.Unlock()
			to = nil
			reply("250 OK queued")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 command not implemented")
		}
	}
}
