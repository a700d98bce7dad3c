package mailpit

import "time"

// The wire types mirror Mailpit v1.33.1's API v1
// (server/apiv1/swaggerParams.go, internal/storage/structs.go).

// Address is an email address with an optional display name.
type Address struct {
	Name    string
	Address string
}

// SendRequest is the body of POST /api/v1/send.
type SendRequest struct {
	From        SendAddress
	To          []SendAddress     `json:",omitempty"`
	Cc          []SendAddress     `json:",omitempty"`
	Bcc         []string          `json:",omitempty"`
	ReplyTo     []SendAddress     `json:",omitempty"`
	Subject     string            `json:",omitempty"`
	Text        string            `json:",omitempty"`
	HTML        string            `json:",omitempty"`
	Attachments []SendAttachment  `json:",omitempty"`
	Tags        []string          `json:",omitempty"`
	Headers     map[string]string `json:",omitempty"`
}

// SendAddress is an address in a SendRequest.
type SendAddress struct {
	Email string
	Name  string `json:",omitempty"`
}

// SendAttachment is a base64-encoded attachment in a SendRequest.
type SendAttachment struct {
	Content     string
	Filename    string
	ContentType string `json:",omitempty"`
	ContentID   string `json:",omitempty"`
}

// SendResponse is the answer of POST /api/v1/send.
type SendResponse struct {
	ID string
}

// ErrorResponse is Mailpit's JSON error answer (400).
type ErrorResponse struct {
	Error string
}

// MessageSummary is one entry of a message list or search.
type MessageSummary struct {
	ID          string
	MessageID   string
	Read        bool
	From        *Address
	To          []*Address
	Cc          []*Address
	Bcc         []*Address
	ReplyTo     []*Address
	Subject     string
	Created     time.Time
	Username    string
	Tags        []string
	Size        uint64
	Attachments int
	Snippet     string
}

// MessagesSummary is the answer of GET /api/v1/messages and /api/v1/search.
type MessagesSummary struct {
	Total               uint64           `json:"total"`
	Unread              uint64           `json:"unread"`
	Count               uint64           `json:"count"`
	MessagesCount       uint64           `json:"messages_count"`
	MessagesUnreadCount uint64           `json:"messages_unread"`
	Start               int              `json:"start"`
	Tags                []string         `json:"tags"`
	Messages            []MessageSummary `json:"messages"`
}

// Message is the answer of GET /api/v1/message/{ID}.
type Message struct {
	ID              string
	MessageID       string
	From            *Address
	To              []*Address
	Cc              []*Address
	Bcc             []*Address
	ReplyTo         []*Address
	ReturnPath      string
	Subject         string
	ListUnsubscribe ListUnsubscribe
	Date            time.Time
	Tags            []string
	Username        string
	Text            string
	HTML            string
	Size            uint64
	Inline          []Attachment
	Attachments     []Attachment
}

// ListUnsubscribe summarises the List-Unsubscribe headers of a Message.
type ListUnsubscribe struct {
	Header     string
	Links      []string
	Errors     string
	HeaderPost string
}

// Attachment describes an attachment of a Message.
type Attachment struct {
	PartID      string
	FileName    string
	ContentType string
	ContentID   string
	Size        uint64
}
