mod clients;
