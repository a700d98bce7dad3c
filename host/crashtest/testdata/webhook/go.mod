module example.com/webhook

go 1.26.0

require github.com/connhost/connhost v0.0.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/connhost/connhost => ../../../..
