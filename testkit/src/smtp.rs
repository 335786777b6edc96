//! A small SMTP sink on 127.0.0.1 for alert tests: speaks enough SMTP (EHLO, MAIL, RCPT,
//! DATA, RSET, NOOP, QUIT) to accept mail from a real client and records each message.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Default)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent (headers and body, CRLF line ends, dot-unstuffed).
    pub data: String,
}

#[derive(Clone)]
pub struct SmtpSink {
    pub port: u16,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind smtp sink");
        let port = listener.local_addr().expect("addr").port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let shared = mails.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, shared.clone()));
            }
        });
        SmtpSink { port, mails }
    }

    /// `smtp://127.0.0.1:PORT?tls=none` for PROBACTR_SMTP_URL: the sink speaks plain text, which
    /// monitors accept only when the URL says so.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}?tls=none", self.port)
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }
}

async fn session(stream: TcpStream, mails: Arc<Mutex<Vec<Mail>>>) {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    let mut mail = Mail::default();
    if writer.write_all(b"220 sink ESMTP\r\n").await.is_err() {
        return;
    }
    while let Ok(Some(line)) = lines.next_line().await {
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" | "HELO" => b"250-sink\r\n250 8BITMIME\r\n",
            "MAIL" => {
                mail = Mail {
                    from: address_in(&line),
                    ..Mail::default()
                };
                b"250 ok\r\n"
            }
            "RCPT" => {
                mail.to.push(address_in(&line));
                b"250 ok\r\n"
            }
            "DATA" => {
                if writer.write_all(b"354 go on\r\n").await.is_err() {
                    return;
                }
                while let Ok(Some(data_line)) = lines.next_line().await {
                    if data_line == "." {
                        break;
                    }
                    let unstuffed = data_line.strip_prefix('.').unwrap_or(&data_line);
                    mail.data.push_str(unstuffed);
                    mail.data.push_str("\r\n");
                }
                mails.lock().unwrap().push(std::mem::take(&mut mail));
                b"250 queued\r\n"
            }
            "QUIT" => {
                let _ = writer.write_all(b"221 bye\r\n").await;
                return;
            }
            _ => b"250 ok\r\n",
        };
        if writer.write_all(reply).await.is_err() {
            return;
        }
    }
}

fn address_in(line: &str) -> String {
    let start = line.find('<').map(|i| i + 1).unwrap_or(0);
    let end = line.rfind('>').unwrap_or(line.len());
    line.get(start..end).unwrap_or("").to_owned()
}
